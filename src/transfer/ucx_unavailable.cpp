// The ucx backend in a build without UCX (WCOMM_WITH_UCX=OFF, or libucx-dev missing): it
// reports why and how to get it; cma and tcp still work.
#include "transfer/backend.h"

namespace wcomm::xfer {

std::unique_ptr<Backend> make_ucx_backend(const AgentConfig&, CompletionFn) {
  return make_unavailable_backend(BackendKind::kUcx,
                                  "this build of wcomm has no UCX (configured with WCOMM_WITH_UCX=OFF or without "
                                  "UCX): install libucx-dev and configure with -DWCOMM_WITH_UCX=ON");
}

}  // namespace wcomm::xfer
