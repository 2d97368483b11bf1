// How V0.1's node CLI prints a received or sent value: Python's repr, with tensors as
// Tensor(shape=(3, 224, 224), dtype=torch.float32) and byte strings as bytes(length=N), so the
// scripts that grep V0.1's output keep working against `wcomm node`.
#pragma once

#include <string>

#include "wcomm/value.h"

namespace wcomm::tools {

// The whole value, never abbreviated (V0.1 prints it all).
std::string describe_v01(const Value& value);

// Python's repr of a float: shortest round-trip digits, "1.0" rather than "1", exponent form
// below 1e-4 and from 1e16 on ("1e-05", "1e+16"), "inf", "nan".
std::string python_float_repr(double d);

}  // namespace wcomm::tools
