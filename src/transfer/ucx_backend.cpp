// (placeholder, replaced below)
#include "transfer/backend.h"
namespace wcomm::xfer {
namespace {
class Unavailable final : public Backend {
 public:
  Unavailable(BackendKind k, std::string why) { caps_.kind = k; caps_.reason = std::move(why); }
  Capabilities capabilities() const override { return caps_; }
  Status connect(RemoteAgent&) override { return Error{ErrorCode::kInvalidArgument, caps_.reason}; }
  void start(const std::shared_ptr<Transfer>&) override {}
 private:
  Capabilities caps_;
};
}
std::unique_ptr<Backend> make_ucx_backend(const AgentConfig&, CompletionFn) { return std::make_unique<Unavailable>(BackendKind::kUcx, "ucx: not built yet"); }
}
