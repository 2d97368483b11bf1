// The stand-in for a backend an agent was not configured to use, or that this build lacks: it
// reports why and reaches nobody, so an agent fixed to one backend starts no other (no UCX
// context for a cma agent).
#include "transfer/backend.h"

namespace wcomm::xfer {

namespace {
class UnselectedBackend final : public Backend {
 public:
  UnselectedBackend(BackendKind kind, std::string reason) {
    caps_.kind = kind;
    caps_.reason = std::move(reason);
  }
  Capabilities capabilities() const override { return caps_; }
  Status connect(RemoteAgent&) override { return Error{ErrorCode::kInvalidArgument, caps_.reason}; }
  void start(const std::shared_ptr<Transfer>&) override {}  // never reached: connect refuses

 private:
  Capabilities caps_;
};
}  // namespace

std::unique_ptr<Backend> make_unavailable_backend(BackendKind kind, std::string reason) {
  return std::make_unique<UnselectedBackend>(kind, std::move(reason));
}

std::unique_ptr<Backend> make_unselected_backend(BackendKind kind, BackendKind selected) {
  return make_unavailable_backend(kind, std::string("not selected (AgentConfig.backend is ") + backend_name(selected) + ")");
}

}  // namespace wcomm::xfer
