// _core.Comm: one wcomm::Comm plus the plumbing that turns its Futures into asyncio results.
// Operations get an op id; their completions land in a CompletionQueue whose eventfd the
// Python side watches, and drain() turns a whole batch into Python objects at once. Called
// only from Python (with the GIL); the GIL is released around every call into the core.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "completion_queue.h"
#include "tensor_bridge.h"
#include "wcomm/comm.h"

namespace wcomm::python {

namespace py = pybind11;

class CoreComm {
 public:
  // local / peers: (node_id, host, port) tuples; config: CommConfig fields by name; encoders
  // and decoders: the registries of wireless_comm.Comm (shared, so later registrations show).
  CoreComm(py::tuple local, py::list peers, std::string bind_host, py::dict config, py::dict encoders,
           py::dict decoders);
  ~CoreComm();

  int fd() const { return queue_->fd(); }
  std::uint16_t port() const { return comm_->port(); }
  // Every address listened on, as bound (URL strings).
  py::tuple addresses() const {
    py::list out;
    for (const Address& a : comm_->addresses()) out.append(a.to_string());
    return py::tuple(out);
  }

  // Starts a send and waits up to spin_us (GIL released) for it to complete. Returns
  // (0, None, (message_id, wire_bytes)) if it did (or raises its error), else
  // (op_id, keepalive, None): keepalive holds the objects whose memory the message borrows,
  // to be kept until the op's completion is drained.
  py::tuple send(py::handle obj, const std::string& peer, py::handle piggypayload, std::uint32_t tag,
                 std::optional<double> timeout, bool wait_for_capacity, int spin_us, bool ack = false,
                 int priority = 0, int compress = 0, std::optional<std::uint64_t> retry_key = std::nullopt);
  // Starts a recv and waits up to wait_us (GIL released) for it; a recv with no timeout reads
  // its message on this thread meanwhile (the core's receive fast path), so the message
  // needs no wake-up of the asyncio loop. Returns (0, ok, payload) if it completed, payload as
  // in drain(), else (op_id, None, None).
  py::tuple recv(const std::string& peer, std::uint32_t tag, std::optional<double> timeout, int tensor_mode,
                 int wait_us);
  // Asks the core to cancel an op still in flight (its completion still arrives: cancelled, or
  // the result that beat the cancel).
  void cancel(std::uint64_t op_id);
  // Every completion so far: [(op_id, ok, payload)], payload being (message_id, wire_bytes)
  // for a send, (value, piggypayload, message_id, wire_bytes) for a recv, or the exception.
  py::list drain();
  // Waits up to spin_us (GIL released, spinning) for a completion; true if one is queued.
  bool spin(int spin_us);

  py::tuple peer(const std::string& node_id) const;
  py::list peers() const;
  // Comm::add_peer / remove_peer (peer: a (node_id, host, port, addresses, transport) tuple).
  py::tuple add_peer(py::handle peer);
  bool remove_peer(const std::string& node_id, const std::string& reason);
  void register_type(const std::string& kind, const std::string& type_id, std::uint32_t version);
  py::dict stats() const;
  void close();

  // Test hook for zero-copy proofs: records the address and size of every buffer the core
  // allocates for received tensors and bytes.
  void trace_receive_buffers(bool on);
  py::list traced_receive_buffers();

 private:
  struct Op {
    std::function<void()> cancel;
    TensorMode mode = TensorMode::kAuto;
  };
  struct Trace {
    std::mutex mu;
    std::vector<std::pair<std::uintptr_t, std::size_t>> buffers;
  };

  CommOptions options(std::uint32_t tag, std::optional<double> timeout, bool wait_for_capacity = true) const;
  // (ok, payload) of a finished recv, as drain() reports it.
  std::pair<bool, py::object> received_item(Result<Received>& got, TensorMode mode);

  std::shared_ptr<Comm> comm_;
  std::shared_ptr<CompletionQueue> queue_;
  py::dict encoders_;
  py::dict decoders_;
  std::unordered_map<std::uint64_t, Op> ops_;  // with the GIL only
  bool allow_pickle_ = false;
  std::size_t max_depth_ = 64;
  std::uint64_t next_op_ = 1;
  std::uint64_t python_bytes_copied_ = 0;
  std::shared_ptr<Trace> trace_;
};

}  // namespace wcomm::python
