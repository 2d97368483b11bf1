// Typed Dict field reads (src/core/dict_fields.h): each type read back, and every refusal
// names the field and, for a wrong type, both what was expected and what came.
#include "core/dict_fields.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace wcomm::fields {
namespace {

// The refusal's message, checked to be a kProtocol error (fails the test if r is ok).
template <class T>
std::string refusal(const Result<T>& r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return {};
  EXPECT_EQ(r.error().code, ErrorCode::kProtocol);
  return r.error().message;
}

const Dict kMessage{{"name", "ring"},
                    {"count", -3},
                    {"size", 42},
                    {"huge", UINT64_MAX},
                    {"ratio", 0.5},
                    {"flag", true},
                    {"blob", Bytes(std::string_view("xyz"))},
                    {"items", List{1, 2}},
                    {"pair", Tuple{"a", "b"}},
                    {"nothing", None{}}};

TEST(DictFields, EachTypeReadsBack) {
  EXPECT_EQ(string(kMessage, "name").value(), "ring");
  EXPECT_EQ(string_or_bytes(kMessage, "name").value(), "ring");
  EXPECT_EQ(string_or_bytes(kMessage, "blob").value(), "xyz");
  EXPECT_EQ(int64(kMessage, "count").value(), -3);
  EXPECT_EQ(uint64(kMessage, "size").value(), 42u);
  EXPECT_EQ(uint64(kMessage, "huge").value(), UINT64_MAX);
  EXPECT_EQ(number(kMessage, "ratio").value(), 0.5);
  EXPECT_EQ(number(kMessage, "size").value(), 42.0);  // an integer is a number too
  EXPECT_TRUE(boolean(kMessage, "flag").value());
  EXPECT_EQ(bytes(kMessage, "blob").value()->view(), "xyz");
  EXPECT_EQ(sequence(kMessage, "items").value()->size(), 2u);
  EXPECT_EQ(sequence(kMessage, "pair").value()->size(), 2u);
  EXPECT_TRUE(required(kMessage, "nothing").value()->is_none());
}

TEST(DictFields, MissingFieldIsNamed) {
  EXPECT_EQ(refusal(string(kMessage, "op")), "field 'op' is missing");
  EXPECT_EQ(refusal(uint64(kMessage, "id")), "field 'id' is missing");
  EXPECT_EQ(refusal(boolean(Dict{}, "ok")), "field 'ok' is missing");
  EXPECT_EQ(refusal(required(kMessage, "absent")), "field 'absent' is missing");
}

TEST(DictFields, WrongTypeNamesWhatWasExpectedAndWhatCame) {
  EXPECT_EQ(refusal(string(kMessage, "size")), "field 'size' is not a string (it is an integer)");
  EXPECT_EQ(refusal(string(kMessage, "blob")), "field 'blob' is not a string (it is a byte string)");
  EXPECT_EQ(refusal(int64(kMessage, "name")), "field 'name' is not an integer (it is a string)");
  EXPECT_EQ(refusal(number(kMessage, "flag")), "field 'flag' is not a number (it is a bool)");
  EXPECT_EQ(refusal(boolean(kMessage, "size")), "field 'size' is not a bool (it is an integer)");
  EXPECT_EQ(refusal(bytes(kMessage, "name")), "field 'name' is not a byte string (it is a string)");
  EXPECT_EQ(refusal(sequence(kMessage, "nothing")), "field 'nothing' is not a list or tuple (it is None)");
  EXPECT_EQ(refusal(string_or_bytes(kMessage, "items")),
            "field 'items' is not a string or byte string (it is a list)");
}

TEST(DictFields, UnsignedRefusesANegativeIntegerAndSignedRefusesOneAboveItsRange) {
  EXPECT_EQ(refusal(uint64(kMessage, "count")), "field 'count' is not a non-negative integer (it is a negative integer)");
  EXPECT_EQ(refusal(uint64(kMessage, "ratio")), "field 'ratio' is not a non-negative integer (it is a float)");
  EXPECT_EQ(refusal(int64(kMessage, "huge")), "field 'huge' is too large for a signed 64-bit integer");
}

}  // namespace
}  // namespace wcomm::fields
