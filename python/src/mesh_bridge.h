// _core.MeshCommunicator: the C++ mesh communicators (ZeroMQ-compatible and wcomm) for
// wireless_comm.mesh, on encoded messages (the Python side pickles). Private API.
#pragma once

#include <pybind11/pybind11.h>

namespace wcomm::python {

// The mesh extension's version; wireless_comm.mesh warns when it is not the one it expects.
inline constexpr const char* kMeshVersion = "0.1.0";

void register_mesh(pybind11::module_& m);

}  // namespace wcomm::python
