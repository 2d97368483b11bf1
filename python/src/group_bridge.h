// _core.Group: wcomm::Group for the wireless_comm.Group class (python/wireless_comm/group.py).
#pragma once

#include <pybind11/pybind11.h>

namespace wcomm::python {

// Adds _core.Group and _core.group_spec_from_env to the module.
void register_group(pybind11::module_& m);

}  // namespace wcomm::python
