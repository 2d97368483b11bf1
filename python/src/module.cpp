// PYBIND11_MODULE(_core): the extension under wireless_comm. Its API is private to the
// package (wireless_comm/_core.pyi describes it); users see wireless_comm's classes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "config_bridge.h"
#include "core_comm.h"
#include "errors_bridge.h"
#include "group_bridge.h"
#include "mesh_bridge.h"
#include "to_value.h"
#include "xfer_bridge.h"
#include "wcomm/value.h"

namespace py = pybind11;
using namespace wcomm::python;

PYBIND11_MODULE(_core, m) {
  m.doc() = "wcomm's C++ Comm for the wireless_comm package (private API)";
  register_error_translator();
  register_group(m);
  register_xfer(m);  // wireless_comm.xfer
  register_mesh(m);  // _core.MeshCommunicator (wireless_comm.mesh)

  m.attr("TENSOR_AUTO") = static_cast<int>(TensorMode::kAuto);
  m.attr("TENSOR_TORCH") = static_cast<int>(TensorMode::kTorch);
  m.attr("TENSOR_NUMPY") = static_cast<int>(TensorMode::kNumpy);

  m.def("default_config", [] { return config_to_dict(wcomm::CommConfig{}); },
        "CommConfig's defaults as a dict of fields");
  m.def("validate_config",
        [](py::dict fields) {
          wcomm::CommConfig c = config_from_dict(fields);
          c.validate();
        },
        py::arg("fields"), "Raises ValueError naming the first unacceptable field");
  m.def("load_node_config",
        [](const std::string& path) {
          wcomm::NodeConfig config;
          {
            py::gil_scoped_release release;  // file I/O
            config = wcomm::load_node_config(path);
          }
          return node_config_to_dict(config);
        },
        py::arg("path"), "A YAML node config (V0.1 schema) as a dict; ValueError naming the bad key");
  m.def("parse_address", [](const std::string& text) { return wcomm::Address::parse(text).to_string(); },
        py::arg("text"), "The normal form of tcp://host:port, unix:///path or unix://@name; ValueError if bad");
  m.def("summarize",
        [](py::handle obj, std::size_t max_chars) {
          EncodeContext ctx;
          ctx.allow_pickle = true;  // a summary of anything, never sent
          return wcomm::summarize(to_value(obj, ctx), max_chars);
        },
        py::arg("obj"), py::arg("max_chars") = 200, "The one-line summary `wcomm node` prints for a value");

  py::class_<CoreComm>(m, "Comm")
      .def(py::init<py::tuple, py::list, std::string, py::dict, py::dict, py::dict>(), py::arg("local"),
           py::arg("peers"), py::arg("bind_host"), py::arg("config"), py::arg("encoders"), py::arg("decoders"))
      .def("fd", &CoreComm::fd)
      .def_property_readonly("port", &CoreComm::port)
      .def_property_readonly("addresses", &CoreComm::addresses)
      .def("send", &CoreComm::send, py::arg("obj"), py::arg("peer"), py::arg("piggypayload"), py::arg("tag"),
           py::arg("timeout"), py::arg("wait_for_capacity"), py::arg("spin_us"), py::arg("ack") = false,
           py::arg("priority") = 0, py::arg("compress") = 0, py::arg("retry_key") = py::none())
      .def("recv", &CoreComm::recv, py::arg("peer"), py::arg("tag"), py::arg("timeout"), py::arg("tensor_mode"),
           py::arg("wait_us"))
      .def("cancel", &CoreComm::cancel, py::arg("op_id"))
      .def("drain", &CoreComm::drain)
      .def("spin", &CoreComm::spin, py::arg("spin_us"))
      .def("peer", &CoreComm::peer, py::arg("node_id"))
      .def("peers", &CoreComm::peers)
      .def("add_peer", &CoreComm::add_peer, py::arg("peer"))
      .def("remove_peer", &CoreComm::remove_peer, py::arg("node_id"), py::arg("reason"))
      .def("register_type", &CoreComm::register_type, py::arg("kind"), py::arg("type_id"), py::arg("version"))
      .def("stats", &CoreComm::stats)
      .def("close", &CoreComm::close)
      .def("trace_receive_buffers", &CoreComm::trace_receive_buffers, py::arg("on"))
      .def("traced_receive_buffers", &CoreComm::traced_receive_buffers);
}
