// _core.MeshCommunicator over wcomm::mesh::ZmqCommunicator / WcommCommunicator. Every call
// that may block releases the GIL; messages cross as bytes (one copy each way).
#include "mesh_bridge.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "wcomm/errors.h"
#include "wcomm/mesh/wcomm_communicator.h"
#include "wcomm/mesh/zmq_communicator.h"

namespace wcomm::python {

namespace py = pybind11;
using namespace wcomm::mesh;

namespace {

std::string_view view(const py::bytes& b) {
  char* data = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(b.ptr(), &data, &size) != 0) throw py::error_already_set();
  return {data, static_cast<std::size_t>(size)};
}

py::list to_list(std::vector<std::string> raw) {
  py::list out(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) out[i] = py::bytes(raw[i]);
  return out;
}

class MeshCommunicator {
 public:
  MeshCommunicator(const std::string& backend, std::string my_id, std::vector<std::string> push_ids,
                   const std::string& protocol, std::string ipc_prefix, std::optional<int> sndhwm,
                   std::optional<int> rcvhwm, std::vector<std::string> peer_ids, bool anchor_lock) {
    const CommProtocol p = parse_protocol(protocol);
    py::gil_scoped_release release;  // binding, dialing
    if (backend == "zmq") {
      c_ = std::make_unique<ZmqCommunicator>(std::move(my_id), std::move(push_ids),
                                             ZmqOptions{.protocol = p,
                                                        .ipc_socket_path_prefix = std::move(ipc_prefix),
                                                        .sndhwm = sndhwm,
                                                        .rcvhwm = rcvhwm,
                                                        .anchor_lock = anchor_lock});
    } else if (backend == "wcomm") {
      WcommOptions o{.protocol = p, .ipc_socket_path_prefix = std::move(ipc_prefix), .peer_ids = std::move(peer_ids)};
      o.sndhwm = sndhwm;
      if (rcvhwm) o.max_inbox_messages = static_cast<std::size_t>(std::max(1, *rcvhwm));
      o.anchor_lock = anchor_lock;
      c_ = std::make_unique<WcommCommunicator>(std::move(my_id), std::move(push_ids), std::move(o));
    } else {
      throw InvalidArgumentError("unknown mesh backend '" + backend + "' (zmq or wcomm)");
    }
  }

  Communicator& c() {
    if (!c_) throw ClosedError("the mesh communicator is closed");
    return *c_;
  }

  void send_bytes(const std::string& id, const py::bytes& data) {
    auto v = view(data);
    Communicator& comm = c();
    py::gil_scoped_release release;  // may block at the high-water mark
    comm.send_bytes(id, v);
  }
  bool try_send_bytes(const std::string& id, const py::bytes& data) {
    auto v = view(data);
    return c().try_send_bytes(id, v);  // never blocks: keeping the GIL is cheaper
  }
  // One encoded message to several entities (OutboxCommunicator.send_each, broadcast).
  void send_each_bytes(const std::vector<std::string>& ids, const py::bytes& data) {
    auto v = view(data);
    Communicator& comm = c();
    py::gil_scoped_release release;
    for (const std::string& id : ids) comm.send_bytes(id, v);
  }
  py::list get_all_new_bytes(bool blocking, std::optional<double> timeout_s) {
    Communicator& comm = c();
    std::vector<std::string> raw;
    if (blocking) {
      py::gil_scoped_release release;
      raw = comm.get_all_new_bytes(true, timeout_s);
    } else {
      raw = comm.take_all_bytes();
    }
    return to_list(std::move(raw));
  }
  py::tuple wait(int timeout_ms, const std::vector<std::string>& writable_peers) {
    Communicator& comm = c();
    Communicator::WaitResult r;
    {
      py::gil_scoped_release release;
      r = comm.wait(timeout_ms, writable_peers);
    }
    return py::make_tuple(r.readable, r.event, r.writable);
  }
  bool poll_for_messages(int timeout_ms) {
    Communicator& comm = c();
    py::gil_scoped_release release;
    return comm.poll_for_messages(timeout_ms);
  }
  void register_event_fd(int fd) { c().register_event_for_poll(fd); }
  std::string endpoint() { return c().endpoint(); }
  void close() {
    std::unique_ptr<Communicator> gone = std::move(c_);
    py::gil_scoped_release release;  // closing joins the Comm's loop thread
    gone.reset();
  }

 private:
  std::unique_ptr<Communicator> c_;
};

}  // namespace

void register_mesh(py::module_& m) {
  m.attr("mesh_version") = kMeshVersion;
  py::class_<MeshCommunicator>(m, "MeshCommunicator")
      .def(py::init<const std::string&, std::string, std::vector<std::string>, const std::string&, std::string,
                    std::optional<int>, std::optional<int>, std::vector<std::string>, bool>(),
           py::arg("backend"), py::arg("my_id"), py::arg("push_ids"), py::arg("protocol"), py::arg("ipc_prefix"),
           py::arg("sndhwm") = py::none(), py::arg("rcvhwm") = py::none(),
           py::arg("peer_ids") = std::vector<std::string>{}, py::arg("anchor_lock") = true)
      .def("send_bytes", &MeshCommunicator::send_bytes, py::arg("entity_id"), py::arg("data"))
      .def("try_send_bytes", &MeshCommunicator::try_send_bytes, py::arg("entity_id"), py::arg("data"))
      .def("send_each_bytes", &MeshCommunicator::send_each_bytes, py::arg("entity_ids"), py::arg("data"))
      .def("get_all_new_bytes", &MeshCommunicator::get_all_new_bytes, py::arg("blocking") = false,
           py::arg("timeout_s") = py::none())
      .def("wait", &MeshCommunicator::wait, py::arg("timeout_ms"), py::arg("writable_peers"))
      .def("poll_for_messages", &MeshCommunicator::poll_for_messages, py::arg("timeout_ms"))
      .def("register_event_fd", &MeshCommunicator::register_event_fd, py::arg("fd"))
      .def_property_readonly("endpoint", &MeshCommunicator::endpoint)
      .def("close", &MeshCommunicator::close);
}

}  // namespace wcomm::python
