// Tests of the Value model (integer normalisation, containers, equality) and summarize().
#include <gtest/gtest.h>

#include <limits>

#include "wcomm/value.h"

namespace wcomm {
namespace {

TEST(Value, IntegersNormalise) {
  EXPECT_TRUE(Value(7u).is<std::int64_t>());
  EXPECT_TRUE(Value(std::uint64_t{1} << 63).is<std::uint64_t>());
  EXPECT_EQ(Value(7u), Value(7));
  EXPECT_EQ(Value(std::uint8_t{200}), Value(200));
  EXPECT_TRUE(Value(-1).is_int());
  EXPECT_TRUE(Value(true).is<bool>());
  EXPECT_TRUE(Value(1.5f).is<double>());
  EXPECT_TRUE(Value("s").is<std::string>());
}

TEST(Value, DictFindAndOrder) {
  Dict d{{"a", 1}, {2, "two"}, {"b", List{1, 2}}};
  ASSERT_NE(d.find("a"), nullptr);
  EXPECT_EQ(*d.find("a"), Value(1));
  EXPECT_EQ(d.find("2"), nullptr);  // the int key 2 is not the string "2"
  EXPECT_EQ(d.find("missing"), nullptr);
  EXPECT_EQ(d.items[1].first, Value(2));
  // Order is part of the value (it is the wire order).
  EXPECT_NE(Dict({{"a", 1}, {"b", 2}}), Dict({{"b", 2}, {"a", 1}}));
}

TEST(Value, ContainerEquality) {
  EXPECT_EQ(List({1, "x", None{}}), List({1, "x", None{}}));
  EXPECT_NE(Value(List{1}), Value(Tuple{1}));
  Record r1{"t.R", 1, {{"f", 1}}};
  Record r2 = r1;
  EXPECT_EQ(r1, r2);
  r2.version = 2;
  EXPECT_NE(r1, r2);
  Custom c1{"t.C", 1, std::make_shared<const Value>(List{1})};
  Custom c2{"t.C", 1, std::make_shared<const Value>(List{1})};
  EXPECT_EQ(c1, c2);  // compares the encoded values, not the pointers
  Custom none1{"t.C", 1, nullptr};
  EXPECT_NE(c1, none1);
  EXPECT_EQ(none1, (Custom{"t.C", 1, nullptr}));
  EXPECT_EQ(Value(Bytes("ab")), Value(Bytes("ab")));
  EXPECT_NE(Value(Bytes("ab")), Value("ab"));
}

TEST(Summarize, RendersEachKind) {
  EXPECT_EQ(summarize(None{}), "None");
  EXPECT_EQ(summarize(true), "True");
  EXPECT_EQ(summarize(-5), "-5");
  EXPECT_EQ(summarize(std::numeric_limits<std::uint64_t>::max()), "18446744073709551615");
  EXPECT_EQ(summarize(3.0), "3.0");
  EXPECT_EQ(summarize(0.5), "0.5");
  EXPECT_EQ(summarize("it's"), "'it\\'s'");
  EXPECT_EQ(summarize(Bytes("hello")), "bytes(5)");
  EXPECT_EQ(summarize(Tensor::zeros(DType::kFloat32, {3, 224, 224})), "tensor(float32[3,224,224])");
  EXPECT_EQ(summarize(List{1, 2}), "[1, 2]");
  EXPECT_EQ(summarize(Tuple{1}), "(1,)");
  EXPECT_EQ(summarize(Tuple{1, "a"}), "(1, 'a')");
  EXPECT_EQ(summarize(Dict{{"op", "ping"}, {"sequence", 3}}), "{'op': 'ping', 'sequence': 3}");
  EXPECT_EQ(summarize(Record{"tests.Record", 1, {{"sequence", 9}, {"label", "m"}}}),
            "tests.Record(sequence=9, label='m')");
  EXPECT_EQ(summarize(Custom{"tests.Point", 1, std::make_shared<const Value>(Tuple{1, 2})}),
            "custom(tests.Point, (1, 2))");
  EXPECT_EQ(summarize(Pickled{Buffer::copy_of("abc", 3)}), "pickle(3)");
  EXPECT_EQ(summarize(Dict{{"t", Tensor::zeros(DType::kUInt8, {0})}}), "{'t': tensor(uint8[0])}");
}

TEST(Summarize, AbbreviatesLongStringsAndValues) {
  std::string s = summarize(std::string(500, 'a'));
  EXPECT_LT(s.size(), 80u);
  EXPECT_NE(s.find("...'"), std::string::npos);
  List big;
  for (int i = 0; i < 100000; ++i) big.items.push_back(i);
  std::string b = summarize(big, 60);
  EXPECT_LE(b.size(), 60u);
  EXPECT_EQ(b.substr(b.size() - 3), "...");
  EXPECT_EQ(b.find('\n'), std::string::npos);
  EXPECT_EQ(summarize("line\nbreak"), "'line\\nbreak'");
  // Truncation never splits a UTF-8 sequence.
  std::string u;
  for (int i = 0; i < 40; ++i) u += "\xc3\xa9";
  std::string t = summarize(u, 20);
  for (std::size_t i = 0; i + 3 < t.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(t[i]);
    if (c == 0xc3) {
      EXPECT_EQ(static_cast<unsigned char>(t[i + 1]), 0xa9);
    }
  }
}

}  // namespace
}  // namespace wcomm
