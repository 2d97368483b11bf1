// CommConfig, Peer and node configs between Python (plain dicts and tuples, which the
// wireless_comm dataclasses build and read) and C++, so validation and YAML loading exist
// once, in the core.
#pragma once

#include <pybind11/pybind11.h>

#include "wcomm/config.h"

namespace wcomm::python {

namespace py = pybind11;

// A dict holding CommConfig fields by name (missing ones keep their defaults; None for
// egress_rate_bytes_per_second means unlimited). Throws ValueError for an unknown key.
CommConfig config_from_dict(const py::dict& fields);
py::dict config_to_dict(const CommConfig& config);

Peer peer_from_tuple(const py::handle& peer);  // (node_id, host, port)
py::tuple peer_to_tuple(const Peer& peer);

// {"local": (node_id, host, port), "bind_host": str, "peers": [...], "comm": {...}}
py::dict node_config_to_dict(const NodeConfig& config);

}  // namespace wcomm::python
