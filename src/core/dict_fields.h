// Typed reads of one field of a Dict with string keys (a control message, a header): each
// returns the value, or an Error{kProtocol} that names the field and says what is wrong with
// it, so a malformed message is refused with a reason and never read as 0 or "".
// Callers keep their own error model at their boundary (throw, fill a reason, refuse a peer)
// and build it from error().message.
//
// An optional field: test dict.find(key) (and, where None means "unset", is_none()) first,
// then read it with the typed helper, so a present field of the wrong type is still refused.
// (A namespace of their own: Dict's namespace would let argument-dependent lookup pull these
// short names into every caller's overload set.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wcomm/errors.h"
#include "wcomm/value.h"

namespace wcomm::fields {

// What a value is, for messages: "a string", "an integer", "a negative integer", "None", ...
std::string kind_of(const Value& value);

// The field's value, whatever its type ("field 'k' is missing" when absent).
Result<const Value*> required(const Dict& dict, std::string_view key);

Result<std::string> string(const Dict& dict, std::string_view key);
// A string or a byte string, as its bytes (formats that carry text in either form).
Result<std::string> string_or_bytes(const Dict& dict, std::string_view key);
Result<std::int64_t> int64(const Dict& dict, std::string_view key);    // fits int64_t
Result<std::uint64_t> uint64(const Dict& dict, std::string_view key);  // non-negative
Result<double> number(const Dict& dict, std::string_view key);       // float or integer
Result<bool> boolean(const Dict& dict, std::string_view key);
// Points into `dict`: valid while it lives.
Result<const Bytes*> bytes(const Dict& dict, std::string_view key);
// A list or a tuple, as its items (msgpack peers may send either). Points into `dict`.
Result<const std::vector<Value>*> sequence(const Dict& dict, std::string_view key);

}  // namespace wcomm::fields
