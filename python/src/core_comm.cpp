// _core.Comm (see core_comm.h).
#include "core_comm.h"

#include <chrono>
#include <thread>

#include "config_bridge.h"
#include "errors_bridge.h"
#include "from_value.h"
#include "to_value.h"

namespace wcomm::python {
namespace {

// The CommConfig inside a CommSpec, whichever name the spec gives it (`config`, or `comm` when
// CommSpec is the NodeConfig of config.h).
template <class Spec>
CommConfig& spec_config(Spec& spec) {
  if constexpr (requires { spec.comm; })
    return spec.comm;
  else
    return spec.config;
}

}  // namespace

CoreComm::CoreComm(py::tuple local, py::list peers, std::string bind_host, py::dict config, py::dict encoders,
                   py::dict decoders)
    : queue_(std::make_shared<CompletionQueue>()), encoders_(std::move(encoders)), decoders_(std::move(decoders)) {
  CommSpec spec;
  spec.local = peer_from_tuple(local);
  for (py::handle p : peers) spec.peers.push_back(peer_from_tuple(p));
  spec.bind_host = std::move(bind_host);
  spec.comm = config_from_dict(config);
  allow_pickle_ = spec.comm.allow_unsafe_pickle;
  max_depth_ = static_cast<std::size_t>(spec.comm.max_container_depth);
  py::gil_scoped_release release;  // binds a socket and starts the loop thread
  comm_ = Comm::create(std::move(spec));
  comm_->on_peer_event([queue = queue_](const PeerEvent& e) { queue->push({0, e}); });
}

CoreComm::~CoreComm() {
  if (!comm_) return;
  py::gil_scoped_release release;
  comm_->close();
}

CommOptions CoreComm::options(std::uint32_t tag, std::optional<double> timeout, bool wait_for_capacity) const {
  CommOptions o;
  o.tag = tag;
  if (timeout) o.timeout = Seconds(*timeout);
  o.wait_for_capacity = wait_for_capacity;
  return o;
}

py::tuple CoreComm::send(py::handle obj, const std::string& peer, py::handle piggypayload, std::uint32_t tag,
                         std::optional<double> timeout, bool wait_for_capacity, int spin_us, bool ack, int priority,
                         int compress, std::optional<std::uint64_t> retry_key) {
  if (priority < 0 || priority > 3) raise_error(ErrorCode::kInvalidArgument, "priority must be 0..3");
  if (compress < 0 || compress > 2) raise_error(ErrorCode::kInvalidArgument, "compress must be 0..2");
  const Peer& dst = comm_->peer(peer);
  EncodeContext ctx;
  ctx.encoders = encoders_;
  ctx.allow_pickle = allow_pickle_;
  ctx.max_depth = max_depth_;
  Value value = to_value(obj, ctx);
  Value piggy = piggypayload.is_none() ? Value() : to_value(piggypayload, ctx);
  const std::uint64_t op_id = next_op_++;
  Future<SendResult> future;
  {
    py::gil_scoped_release release;
    CommOptions o = options(tag, timeout, wait_for_capacity);
    o.ack = ack;
    o.priority = static_cast<Priority>(priority);
    o.compress = static_cast<Compression>(compress);
    o.retry_key = retry_key;
    future = comm_->send(std::move(value), dst, std::move(piggy), o);
    // The loop thread usually writes a small message within microseconds; catching that here
    // saves a trip through the completion queue and a wake-up of the asyncio loop.
    if (spin_us > 0) {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
      while (!future.ready() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    }
  }
  if (future.ready()) {
    Result<SendResult>& r = future.wait();
    if (!r.ok()) {
      PyErr_SetObject(error_class(r.error().code, r.error().message).ptr(), make_exception(r.error()).ptr());
      throw py::error_already_set();
    }
    return py::make_tuple(0, py::none(), py::make_tuple(r.value().message_id, r.value().wire_bytes));
  }
  ops_.emplace(op_id, Op{[future]() mutable { future.cancel(); }, TensorMode::kAuto});
  future.then([queue = queue_, op_id](Result<SendResult> r) { queue->push({op_id, std::move(r)}); });
  return py::make_tuple(op_id, ctx.keepalive.empty() ? py::object(py::none()) : py::object(ctx.keepalive), py::none());
}

py::tuple CoreComm::recv(const std::string& peer, std::uint32_t tag, std::optional<double> timeout, int tensor_mode,
                         int wait_us) {
  const Peer& src = comm_->peer(peer);
  const auto mode = static_cast<TensorMode>(tensor_mode);
  Future<Received> future;
  {
    py::gil_scoped_release release;
    // Waiting first, this thread reads its message itself and makes no promise for it.
    future = wait_us > 0 ? comm_->recv_for(src, std::chrono::microseconds(wait_us), options(tag, timeout))
                         : comm_->recv(src, options(tag, timeout));
  }
  if (future.ready()) {
    auto [ok, payload] = received_item(future.wait(), mode);
    return py::make_tuple(0, ok, payload);
  }
  const std::uint64_t op_id = next_op_++;
  ops_.emplace(op_id, Op{[future]() mutable { future.cancel(); }, mode});
  future.then([queue = queue_, op_id](Result<Received> r) { queue->push({op_id, std::move(r)}); });
  return py::make_tuple(op_id, py::none(), py::none());
}

std::pair<bool, py::object> CoreComm::received_item(Result<Received>& got, TensorMode mode) {
  if (!got.ok()) return {false, make_exception(got.error())};
  DecodeContext ctx{decoders_, mode, 0};
  std::pair<bool, py::object> item;
  try {
    Received& r = got.value();
    py::object value = to_python(r.value, ctx);
    py::object piggy = to_python(r.piggypayload, ctx);
    item = {true, py::make_tuple(value, piggy, r.message_id, r.wire_bytes)};
  } catch (py::error_already_set& e) {
    // The message arrived but has no Python form: that recv fails with the reason.
    item = {false, e.value()};
  }
  python_bytes_copied_ += ctx.bytes_copied;
  return item;
}

void CoreComm::cancel(std::uint64_t op_id) {
  auto found = ops_.find(op_id);
  if (found == ops_.end()) return;  // already completed
  auto cancel = found->second.cancel;
  py::gil_scoped_release release;
  cancel();
}

py::list CoreComm::drain() {
  std::vector<Completion> batch = queue_->take();
  py::list out(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Completion& c = batch[i];
    TensorMode mode = TensorMode::kAuto;
    if (auto found = ops_.find(c.op_id); found != ops_.end()) {
      mode = found->second.mode;
      ops_.erase(found);
    }
    py::object item;
    if (auto* event = std::get_if<PeerEvent>(&c.result)) {
      item = py::make_tuple(0, true, py::make_tuple(event->node_id, peer_event_name(event->kind), event->reason));
    } else if (auto* sent = std::get_if<Result<SendResult>>(&c.result)) {
      if (sent->ok())
        item = py::make_tuple(c.op_id, true, py::make_tuple(sent->value().message_id, sent->value().wire_bytes));
      else
        item = py::make_tuple(c.op_id, false, make_exception(sent->error()));
    } else {
      auto [ok, payload] = received_item(std::get<Result<Received>>(c.result), mode);
      item = py::make_tuple(c.op_id, ok, payload);
    }
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), item.release().ptr());
  }
  return out;
}

bool CoreComm::spin(int spin_us) {
  py::gil_scoped_release release;
  return queue_->spin_until_nonempty(std::chrono::microseconds(spin_us));
}

py::tuple CoreComm::peer(const std::string& node_id) const { return peer_to_tuple(comm_->peer(node_id)); }

py::tuple CoreComm::add_peer(py::handle peer) {
  Peer p = peer_from_tuple(peer);
  const Peer* added;
  {
    py::gil_scoped_release release;
    added = &comm_->add_peer(std::move(p));
  }
  return peer_to_tuple(*added);
}

bool CoreComm::remove_peer(const std::string& node_id, const std::string& reason) {
  py::gil_scoped_release release;
  return comm_->remove_peer(node_id, reason);
}

py::list CoreComm::peers() const {
  py::list out;
  for (const Peer& p : comm_->peers()) out.append(peer_to_tuple(p));
  return out;
}

void CoreComm::register_type(const std::string& kind, const std::string& type_id, std::uint32_t version) {
  py::gil_scoped_release release;
  if (kind == "record")
    comm_->register_record(type_id, version);
  else
    comm_->register_custom(type_id, version);
}

py::dict CoreComm::stats() const {
  CommStats s = comm_->stats();
  py::dict out;
  out["messages_sent"] = s.messages_sent;
  out["messages_received"] = s.messages_received;
  out["wire_bytes_sent"] = s.wire_bytes_sent;
  out["wire_bytes_received"] = s.wire_bytes_received;
  // The core's copies plus the Python layer's (received bytes objects).
  out["bytes_copied"] = s.bytes_copied + python_bytes_copied_;
  out["connections_dialed"] = s.connections_dialed;
  out["connections_accepted"] = s.connections_accepted;
  out["connections_rejected"] = s.connections_rejected;
  out["messages_read_by_receivers"] = s.messages_read_by_receivers;
  out["messages_read_busy_polling"] = s.messages_read_busy_polling;
  out["errors_without_waiter"] = s.errors_without_waiter;
  out["duplicates_dropped"] = s.duplicates_dropped;
  out["messages_chunked"] = s.messages_chunked;
  out["chunks_sent"] = s.chunks_sent;
  out["compression_bytes_in"] = s.compression_bytes_in;
  out["compression_bytes_out"] = s.compression_bytes_out;
  out["compression_seconds"] = s.compression_seconds;
  out["bytes_decompressed"] = s.bytes_decompressed;
  py::dict peers;
  for (const auto& [name, p] : s.peers) {
    py::dict d;
    d["connected"] = p.connected;
    d["transport"] = p.transport;
    d["payload_path"] = p.payload_path;
    d["recvs_waiting"] = p.recvs_waiting;
    peers[py::str(name)] = d;
  }
  out["peers"] = peers;
  return out;
}

void CoreComm::close() {
  py::gil_scoped_release release;
  comm_->close();
}

void CoreComm::trace_receive_buffers(bool on) {
  if (!on) {
    comm_->set_allocator({});
    trace_.reset();
    return;
  }
  trace_ = std::make_shared<Trace>();
  comm_->set_allocator([trace = trace_](std::size_t nbytes) {
    Buffer b = Buffer::allocate(nbytes);
    std::lock_guard lock(trace->mu);
    trace->buffers.emplace_back(reinterpret_cast<std::uintptr_t>(b.data()), nbytes);
    return b;
  });
}

py::list CoreComm::traced_receive_buffers() {
  py::list out;
  if (!trace_) return out;
  std::lock_guard lock(trace_->mu);
  for (auto [address, size] : trace_->buffers) out.append(py::make_tuple(address, size));
  trace_->buffers.clear();
  return out;
}

}  // namespace wcomm::python
