// Conversion between report JSON and wcomm Values, for report sections that travel inside
// control messages (the responder's report in `stopped`).
#pragma once

#include <nlohmann/json.hpp>

#include "wcomm/value.h"

namespace wcomm::bench {

// null, booleans, numbers, strings, arrays (List) and objects (Dict with string keys).
Value json_to_value(const nlohmann::json& json);

// The inverse for the same shapes; Tuple becomes an array, a dict key that is not a string is
// written as its summary, and bytes / tensors / records (which a report does not carry) as
// their one-line summary string.
nlohmann::json value_to_json(const Value& value);

}  // namespace wcomm::bench
