// _core bindings for wcomm::xfer. Descriptors are (addr, len, dev_id) tuples; handles are
// plain ids; every call that can wait or touch the network releases the GIL. An Agent, a
// producer or a consumer that needs a Comm gets its own C++ Comm, made here from (node_id,
// host, port) tuples, independent of any asyncio wireless_comm.Comm.
#include "xfer_bridge.h"

#include <pybind11/stl.h>

#include <chrono>
#include <thread>

#include "wcomm/comm.h"
#include "wcomm/xfer/agent.h"
#include "wcomm/xfer/cache_service.h"
#include "wcomm/xfer/shared_region.h"

namespace wcomm::python {

namespace py = pybind11;
using namespace wcomm::xfer;

namespace {

using DescTuple = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>;

DescList to_descs(const std::vector<DescTuple>& in) {
  DescList out;
  for (const auto& [a, l, d] : in) out.push_back({a, l, d});
  return out;
}
std::vector<DescTuple> from_descs(const DescList& in) {
  std::vector<DescTuple> out;
  for (const Desc& d : in) out.emplace_back(d.addr, d.len, d.dev_id);
  return out;
}

template <class T>
T value_or_throw(Result<T> r) {
  return std::move(r).value();
}
void check(const Status& s) {
  if (!s) throw_error(s.error());
}

Peer peer_of(const py::tuple& t) {
  if (t.size() != 3) throw InvalidArgumentError("a peer is (node_id, host, port)");
  return Peer{t[0].cast<std::string>(), t[1].cast<std::string>(), t[2].cast<std::uint16_t>()};
}

// A C++ Comm from Python tuples, or none when local is None. With a cluster key, or asked
// for on loopback, it accepts nodes that dial in (agents that loaded our metadata first).
std::shared_ptr<Comm> make_comm(const py::object& local, const py::list& peers, const std::string& cluster_key,
                                bool allow_unauthenticated_joins) {
  if (local.is_none()) return nullptr;
  CommSpec spec{.local = peer_of(local.cast<py::tuple>())};
  for (const auto& p : peers) spec.peers.push_back(peer_of(p.cast<py::tuple>()));
  spec.comm.cluster_key = cluster_key;
  spec.comm.accept_unknown_peers = !cluster_key.empty() || allow_unauthenticated_joins;
  spec.comm.allow_unauthenticated_joins = allow_unauthenticated_joins;
  py::gil_scoped_release release;
  return Comm::create(std::move(spec));
}

py::dict caps_dict(const Capabilities& c) {
  py::dict d;
  d["backend"] = backend_name(c.kind);
  d["available"] = c.available;
  d["reason"] = c.reason;
  d["write"] = c.write;
  d["read"] = c.read;
  d["same_host_only"] = c.same_host_only;
  d["notifications"] = c.notifications;
  d["device_memory"] = c.device_memory;
  return d;
}

// The agent plus the Comm it was given (kept alive together, closed together).
struct PyAgent {
  std::shared_ptr<Comm> comm;
  std::unique_ptr<Agent> agent;
  ~PyAgent() {
    py::gil_scoped_release release;
    agent.reset();
    if (comm) comm->close();
  }
};

struct PyProducer {
  std::shared_ptr<Comm> comm;
  std::unique_ptr<CacheProducer> producer;
  void close() {
    py::gil_scoped_release release;
    if (producer) producer->close();
    producer.reset();
    if (comm) comm->close();
  }
  ~PyProducer() { close(); }
};

struct PyConsumer {
  std::shared_ptr<Comm> comm;
  std::unique_ptr<CacheConsumer> consumer;
  void close() {
    py::gil_scoped_release release;
    if (consumer) consumer->close();
    consumer.reset();
    if (comm) comm->close();
  }
  ~PyConsumer() { close(); }
  CacheConsumer& get() {
    if (!consumer) throw ClosedError("the consumer is closed");
    return *consumer;
  }
};

py::tuple status_tuple(const ItemStatus& s) {
  return py::make_tuple(readiness_name(s.readiness), s.reason, s.blocks, s.bytes);
}

}  // namespace

void register_xfer(py::module_& m) {
  py::class_<PyAgent>(m, "XferAgent")
      .def(py::init([](const std::string& name, const std::string& backend, py::object local, py::list peers,
                       double default_timeout, unsigned cma_threads, py::bytes cluster_key, bool allow_unauthenticated_joins) {
             auto a = std::make_unique<PyAgent>();
             a->comm = make_comm(local, peers, cluster_key, allow_unauthenticated_joins);
             AgentConfig c{.name = name, .backend = parse_backend(backend), .comm = a->comm, .cma_threads = cma_threads,
                           .default_timeout = std::chrono::duration<double>(default_timeout)};
             py::gil_scoped_release release;
             a->agent = Agent::create(std::move(c));
             return a;
           }),
           py::arg("name"), py::arg("backend"), py::arg("local"), py::arg("peers"), py::arg("default_timeout"),
           py::arg("cma_threads"), py::arg("cluster_key") = py::bytes(), py::arg("allow_unauthenticated_joins") = false)
      .def_property_readonly("name", [](PyAgent& a) { return a.agent->name(); })
      .def_property_readonly("generation", [](PyAgent& a) { return a.agent->generation(); })
      .def("capabilities", [](PyAgent& a, const std::string& b) { return caps_dict(a.agent->capabilities(parse_backend(b))); })
      .def("register_memory", [](PyAgent& a, std::uint64_t addr, std::uint64_t len) {
        py::gil_scoped_release release;
        check(a.agent->register_memory(reinterpret_cast<const void*>(addr), len));
      })
      .def("deregister", [](PyAgent& a, std::uint64_t addr, std::uint64_t len) {
        py::gil_scoped_release release;
        check(a.agent->deregister(reinterpret_cast<const void*>(addr), len));
      })
      .def("allocate_memory", [](PyAgent& a, std::size_t len) {
        py::gil_scoped_release release;
        return reinterpret_cast<std::uint64_t>(value_or_throw(a.agent->allocate_memory(len)));
      })
      .def("free_memory", [](PyAgent& a, std::uint64_t addr) {
        py::gil_scoped_release release;
        check(a.agent->free_memory(reinterpret_cast<void*>(addr)));
      })
      .def("registered", [](PyAgent& a) { return from_descs(a.agent->registered()); })
      .def("metadata", [](PyAgent& a) {
        std::string m;
        {
          py::gil_scoped_release release;
          m = a.agent->metadata();
        }
        return py::bytes(m);
      })
      .def("add_remote", [](PyAgent& a, const std::string& metadata) {
        py::gil_scoped_release release;
        return value_or_throw(a.agent->add_remote(metadata));
      })
      .def("remove_remote", [](PyAgent& a, const std::string& name) { check(a.agent->remove_remote(name)); })
      .def("backend_for", [](PyAgent& a, const std::string& name) { return std::string(backend_name(value_or_throw(a.agent->backend_for(name)))); })
      .def("post",
           [](PyAgent& a, const std::string& op, const std::vector<DescTuple>& local, const std::string& remote,
              const std::vector<DescTuple>& remote_descs, const std::string& notification, double timeout) {
             if (op != "write" && op != "read") throw InvalidArgumentError("op must be 'write' or 'read', not '" + op + "'");
             DescList l = to_descs(local), r = to_descs(remote_descs);
             py::gil_scoped_release release;
             return value_or_throw(a.agent->post(op == "write" ? Op::kWrite : Op::kRead, l, remote, r,
                                                 {.notification = notification, .timeout = std::chrono::duration<double>(timeout)}))
                 .id;
           },
           py::arg("op"), py::arg("local"), py::arg("remote"), py::arg("remote_descs"), py::arg("notification") = "",
           py::arg("timeout") = 0.0)
      .def("poll", [](PyAgent& a, std::uint64_t h) {
        XferStatus s = a.agent->poll(XferHandle{h});
        return py::make_tuple(xfer_state_name(s.state), s.reason);
      })
      .def("wait",
           [](PyAgent& a, std::uint64_t h, double timeout) {
             XferStatus s;
             {
               py::gil_scoped_release release;
               s = a.agent->wait(XferHandle{h}, std::chrono::duration<double>(timeout));
             }
             return py::make_tuple(xfer_state_name(s.state), s.reason);
           },
           py::arg("handle"), py::arg("timeout"))
      .def("release", [](PyAgent& a, std::uint64_t h) {
        py::gil_scoped_release release;
        check(a.agent->release(XferHandle{h}));
      })
      .def("take_notifications", [](PyAgent& a, bool raw) {
        py::list out;
        for (const Notification& n : a.agent->take_notifications()) {
          if (raw) out.append(py::make_tuple(n.remote, py::bytes(n.message)));
          else out.append(py::make_tuple(n.remote, py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(
                                                        n.message.data(), static_cast<py::ssize_t>(n.message.size()), "replace"))));
        }
        return out;
      }, py::arg("raw") = false)
      .def("send_notification", [](PyAgent& a, const std::string& remote, py::bytes message, double timeout) {
        std::string text = message;
        py::gil_scoped_release release;
        check(a.agent->send_notification(remote, text, std::chrono::duration<double>(timeout)));
      }, py::arg("remote"), py::arg("message"), py::arg("timeout"));

  py::class_<SharedRegion, std::shared_ptr<SharedRegion>>(m, "XferSharedRegion")
      .def_static("create", [](const std::string& name, std::size_t n, std::size_t b) {
        py::gil_scoped_release release;
        return std::shared_ptr<SharedRegion>(SharedRegion::create(name, n, b));
      })
      .def_static("join", [](const std::string& name, double timeout) {
        py::gil_scoped_release release;
        return std::shared_ptr<SharedRegion>(SharedRegion::join(name, std::chrono::duration<double>(timeout)));
      })
      .def_property_readonly("name", &SharedRegion::name)
      .def_property_readonly("is_creator", &SharedRegion::is_creator)
      .def_property_readonly("block_count", &SharedRegion::block_count)
      .def_property_readonly("block_bytes", &SharedRegion::block_bytes)
      .def_property_readonly("address", [](SharedRegion& r) { return reinterpret_cast<std::uint64_t>(r.data()); })
      .def_property_readonly("size", &SharedRegion::size)
      .def("buffer", [](SharedRegion& r) { return py::memoryview::from_memory(r.data(), static_cast<py::ssize_t>(r.size())); })
      .def("alloc", [](SharedRegion& r, std::size_t n) { return value_or_throw(r.alloc(n)); })
      .def("free", [](SharedRegion& r, const std::vector<std::uint32_t>& i) { check(r.free(i)); })
      .def_property_readonly("free_blocks", &SharedRegion::free_blocks)
      .def("descs", [](SharedRegion& r, const std::vector<std::uint32_t>& i) { return from_descs(r.descs(i)); });

  m.def("xfer_compat_hash", [](const std::string& version, const std::string& model, const std::string& dtype,
                               std::uint64_t block_bytes) {
    return compat_hash({.version = version, .model_id = model, .dtype = dtype, .block_bytes = block_bytes});
  });
  m.attr("XFER_CONNECTOR_VERSION") = kConnectorVersion;

  py::class_<PyProducer>(m, "XferCacheProducer")
      .def(py::init([](py::tuple local, py::list peers, const std::string& model, const std::string& dtype,
                       std::uint64_t block_bytes, const std::string& backend, double transfer_timeout,
                       py::bytes cluster_key, bool allow_unauthenticated_joins) {
             auto p = std::make_unique<PyProducer>();
             p->comm = make_comm(local, peers, cluster_key, allow_unauthenticated_joins);
             CacheProducerConfig c{.comm = p->comm,
                                   .compat = {.model_id = model, .dtype = dtype, .block_bytes = block_bytes},
                                   .agent = {.name = "producer:" + local[0].cast<std::string>(), .backend = parse_backend(backend)},
                                   .transfer_timeout = std::chrono::duration<double>(transfer_timeout)};
             py::gil_scoped_release release;
             p->producer = CacheProducer::create(std::move(c));
             return p;
           }),
           py::arg("local"), py::arg("peers"), py::arg("model_id"), py::arg("dtype"), py::arg("block_bytes"),
           py::arg("backend"), py::arg("transfer_timeout"), py::arg("cluster_key") = py::bytes(),
           py::arg("allow_unauthenticated_joins") = false)
      .def("publish", [](PyProducer& p, const std::string& key, py::buffer data) {
        py::buffer_info info = data.request();
        if (!p.producer) throw ClosedError("the producer is closed");
        py::gil_scoped_release release;
        p.producer->publish(key, info.ptr, static_cast<std::size_t>(info.size * info.itemsize));
      })
      .def_property_readonly("parked_requests", [](PyProducer& p) { return p.producer ? p.producer->parked_requests() : 0; })
      .def("close", &PyProducer::close);

  py::class_<PyConsumer>(m, "XferCacheConsumer")
      .def(py::init([](py::tuple local, py::list peers, std::shared_ptr<SharedRegion> region, const std::string& model,
                       const std::string& dtype, const std::string& backend, double request_timeout, py::bytes cluster_key) {
             auto c = std::make_unique<PyConsumer>();
             c->comm = make_comm(local, peers, cluster_key, false);
             CacheConsumerConfig cfg{.comm = c->comm,
                                     .compat = {.model_id = model, .dtype = dtype, .block_bytes = region->block_bytes()},
                                     .agent = {.name = "consumer:" + local[0].cast<std::string>(), .backend = parse_backend(backend)},
                                     .region = region,
                                     .request_timeout = std::chrono::duration<double>(request_timeout)};
             py::gil_scoped_release release;
             c->consumer = CacheConsumer::create(std::move(cfg));
             return c;
           }),
           py::arg("local"), py::arg("peers"), py::arg("region"), py::arg("model_id"), py::arg("dtype"),
           py::arg("backend"), py::arg("request_timeout"), py::arg("cluster_key") = py::bytes())
      .def("request", [](PyConsumer& c, const std::string& key, const std::string& producer, std::uint64_t bytes) {
        py::gil_scoped_release release;
        check(c.get().request(key, producer, bytes));
      })
      .def("probe", [](PyConsumer& c, const std::string& key) { return status_tuple(c.get().probe(key)); })
      .def("take", [](PyConsumer& c, const std::string& key) { return status_tuple(value_or_throw(c.get().take(key))); })
      .def("close", &PyConsumer::close);
}

}  // namespace wcomm::python
