// _core.Group: the C++ Group's calls on torch tensors and numpy arrays, in place, with the GIL
// released for the whole call. A CollectiveError becomes wireless_comm.group's
// CollectiveError (also an instance of the class its cause maps to, e.g. OperationTimeoutError).
#include "group_bridge.h"

#include <pybind11/stl.h>

#include <memory>

#include "errors_bridge.h"
#include "tensor_bridge.h"
#include "wcomm/collectives/group.h"

namespace wcomm::python {
namespace {

namespace py = pybind11;

Tensor as_tensor(py::handle obj, const char* what) {
  std::optional<Tensor> t = tensor_from_python(obj);
  if (!t) throw InvalidArgumentError(std::string(what) + " must be a torch tensor or a numpy array");
  return *t;
}

ReduceOp as_op(const std::string& name) {
  auto op = parse_reduce_op(name);
  if (!op) throw InvalidArgumentError("unknown reduction '" + name + "': use sum, prod, min, max, xor, and or or");
  return *op;
}

CallOptions call_options(std::optional<double> timeout, const std::string& algorithm = "auto") {
  CallOptions o;
  if (timeout) o.timeout = Seconds(*timeout);
  auto a = parse_algorithm(algorithm);
  if (!a) throw InvalidArgumentError("unknown algorithm '" + algorithm + "': use auto, ring or recursive_doubling");
  o.algorithm = *a;
  return o;
}

// Runs f without the GIL; a CollectiveError is raised as wireless_comm.group's class.
template <class F>
void without_gil(F&& f) {
  std::optional<CollectiveError> failed;
  {
    py::gil_scoped_release release;
    try {
      f();
    } catch (const CollectiveError& e) {
      failed.emplace(e);
    }
  }
  if (failed) {
    py::object make = py::module_::import("wireless_comm.group").attr("_collective_error");
    py::object exc = make(error_class(failed->code()), failed->rank(), failed->what());
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    throw py::error_already_set();
  }
}

py::dict spec_to_dict(const RendezvousSpec& s) {
  py::dict d;
  d["rank"] = s.rank;
  d["world_size"] = s.world;
  d["master_addr"] = s.master_addr;
  d["master_port"] = s.master_port;
  d["source"] = s.source;
  return d;
}

}  // namespace

void register_group(py::module_& m) {
  m.def("group_spec_from_env", [] { return spec_to_dict(rendezvous_from_env()); },
        "The rendezvous spec torchrun / Slurm / mpirun set in the environment, as a dict; ValueError if none");

  py::class_<Group>(m, "Group")
      .def(py::init([](int rank, int world, std::optional<std::string> master_addr, std::optional<int> master_port,
                       std::optional<std::vector<std::pair<std::string, int>>> peers, bool from_env,
                       std::string bind_host, std::string advertise_host, double timeout, double rendezvous_timeout,
                       std::size_t small_allreduce_bytes, std::size_t segment_bytes) {
             RendezvousSpec spec;
             if (from_env) {
               spec = rendezvous_from_env();
             } else {
               spec.rank = rank;
               spec.world = world;
             }
             if (master_addr) spec.master_addr = *master_addr;
             if (master_port) {
               if (*master_port < 1 || *master_port > 65535)
                 throw InvalidArgumentError("master_port " + std::to_string(*master_port) + " is outside 1..65535");
               spec.master_port = static_cast<std::uint16_t>(*master_port);
             }
             if (peers)
               for (auto& [host, port] : *peers)
                 spec.peers.push_back(Peer{.node_id = "", .host = host, .port = static_cast<std::uint16_t>(port)});
             if (!bind_host.empty()) spec.bind_host = bind_host;
             if (!advertise_host.empty()) spec.advertise_host = advertise_host;
             spec.timeout = std::chrono::duration<double>(rendezvous_timeout);
             GroupOptions options;
             options.timeout = Seconds(timeout);
             options.small_allreduce_bytes = small_allreduce_bytes;
             options.segment_bytes = segment_bytes;
             py::gil_scoped_release release;
             return Group::create(spec, options);
           }),
           py::arg("rank"), py::arg("world_size"), py::arg("master_addr"), py::arg("master_port"), py::arg("peers"),
           py::arg("from_env"), py::arg("bind_host"), py::arg("advertise_host"), py::arg("timeout"),
           py::arg("rendezvous_timeout"), py::arg("small_allreduce_bytes"), py::arg("segment_bytes"))
      .def_property_readonly("rank", &Group::rank)
      .def_property_readonly("world_size", &Group::world)
      .def("barrier", [](Group& g, std::optional<double> timeout) {
        auto o = call_options(timeout);
        without_gil([&] { g.barrier(o); });
      }, py::arg("timeout"))
      .def("broadcast", [](Group& g, py::handle t, int root, std::optional<double> timeout) {
        Tensor x = as_tensor(t, "broadcast's tensor");
        auto o = call_options(timeout);
        without_gil([&] { g.broadcast(x, root, o); });
      }, py::arg("tensor"), py::arg("root"), py::arg("timeout"))
      .def("allgather", [](Group& g, py::handle in, py::handle out, std::optional<double> timeout) {
        Tensor a = as_tensor(in, "allgather's input"), b = as_tensor(out, "allgather's output");
        auto o = call_options(timeout);
        without_gil([&] { g.allgather(a, b, o); });
      }, py::arg("input"), py::arg("output"), py::arg("timeout"))
      .def("reduce_scatter", [](Group& g, py::handle in, py::handle out, const std::string& op,
                                std::optional<double> timeout) {
        Tensor a = as_tensor(in, "reduce_scatter's input"), b = as_tensor(out, "reduce_scatter's output");
        ReduceOp r = as_op(op);
        auto o = call_options(timeout);
        without_gil([&] { g.reduce_scatter(a, b, r, o); });
      }, py::arg("input"), py::arg("output"), py::arg("op"), py::arg("timeout"))
      .def("allreduce", [](Group& g, py::handle t, const std::string& op, std::optional<double> timeout,
                           const std::string& algorithm) {
        Tensor x = as_tensor(t, "allreduce's tensor");
        ReduceOp r = as_op(op);
        auto o = call_options(timeout, algorithm);
        without_gil([&] { g.allreduce(x, r, o); });
      }, py::arg("tensor"), py::arg("op"), py::arg("timeout"), py::arg("algorithm"))
      .def("send", [](Group& g, py::handle t, int dst, std::uint32_t tag, std::optional<double> timeout) {
        Tensor x = as_tensor(t, "send's tensor");
        auto o = call_options(timeout);
        without_gil([&] { g.send(x, dst, tag, o); });
      }, py::arg("tensor"), py::arg("dst"), py::arg("tag"), py::arg("timeout"))
      .def("recv", [](Group& g, py::handle t, int src, std::uint32_t tag, std::optional<double> timeout) {
        Tensor x = as_tensor(t, "recv's tensor");
        auto o = call_options(timeout);
        without_gil([&] { g.recv(x, src, tag, o); });
      }, py::arg("tensor"), py::arg("src"), py::arg("tag"), py::arg("timeout"))
      .def("close", [](Group& g) {
        py::gil_scoped_release release;
        g.close();
      });
}

}  // namespace wcomm::python
