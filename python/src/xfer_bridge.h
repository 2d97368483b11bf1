// _core's one-sided transfer classes (wcomm::xfer): Agent, SharedRegion, CacheProducer,
// CacheConsumer. wireless_comm/xfer.py wraps them.
#pragma once

#include <pybind11/pybind11.h>

namespace wcomm::python {
void register_xfer(pybind11::module_& m);
}
