// The mesh codecs: pickle against bytes Python's pickle wrote (and reads back, in the
// pyzmq interop tests), msgpack round trips, and clear errors for what they cannot carry.
#include <gtest/gtest.h>

#include <string>

#include "wcomm/errors.h"
#include "wcomm/mesh/codec.h"

using namespace wcomm;
using namespace wcomm::mesh;

namespace {

std::string unhex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// /usr/bin/python3 -c "import pickle; print(pickle.dumps(v, protocol=4).hex())" for
// v = {'seq': 3, 'text': 'héllo', 'blob': b'\x00\x01', 'pi': 3.25, 'big': 2**40, 'neg': -7,
//      'tuple': (1, 'a', None), 'list': [True, False, None, 1.5], 'u64': 2**63+5, 'min': -2**63}
const char* kPythonProtocol4 =
    "80049599000000000000007d94288c03736571944b038c0474657874948c0668c3a96c6c6f948c04626c6f629443020001948c027069"
    "9447400a0000000000008c03626967948a060000000000018c036e6567944af9ffffff8c057475706c65944b018c0161944e87948c04"
    "6c697374945d942888894e473ff8000000000000658c03753634948a090500000000000080008c036d696e948a0800000000000000"
    "80752e";

Value python_value() {
  return Dict{{"seq", 3},
              {"text", "h\xc3\xa9llo"},
              {"blob", Bytes(std::string("\x00\x01", 2))},
              {"pi", 3.25},
              {"big", std::int64_t{1} << 40},
              {"neg", -7},
              {"tuple", Tuple{1, "a", None{}}},
              {"list", List{true, false, None{}, 1.5}},
              {"u64", (std::uint64_t{1} << 63) + 5},
              {"min", INT64_MIN}};
}

}  // namespace

TEST(MeshPickle, DecodesWhatPythonWrote) {
  PickleCodec codec;
  EXPECT_EQ(codec.decode(unhex(kPythonProtocol4)), python_value());
  std::string protocol5 = unhex(kPythonProtocol4);
  protocol5[1] = 5;
  EXPECT_EQ(codec.decode(protocol5), python_value());
}

TEST(MeshPickle, RoundTripsEveryMeshType) {
  PickleCodec codec;
  const Value v = Dict{{"v", python_value()},
                       {"empty", Dict{}},
                       {"nested", List{List{}, Tuple{}, Tuple{1}, Tuple{1, 2}, Tuple{1, 2, 3, 4, 5}}},
                       {"ints", List{0, 255, 256, 65535, 65536, -1, INT32_MIN, INT32_MAX, std::int64_t{INT32_MAX} + 1,
                                     INT64_MAX, UINT64_MAX}},
                       {"long", std::string(70000, 'y')},
                       {"longbytes", Bytes(std::string(300, 'z'))}};
  EXPECT_EQ(codec.decode(codec.encode(v)), v);
}

TEST(MeshPickle, RefusesWhatItCannotCarry) {
  PickleCodec codec;
  EXPECT_THROW(codec.encode(Value(Tensor())), SerializationError);
  // pickle.dumps({1, 2}) (a set: EMPTY_SET), and a message cut short.
  try {
    codec.decode(unhex("80049509000000000000008f94284b014b0290"));
    FAIL() << "a set was decoded";
  } catch (const SerializationError& e) {
    EXPECT_NE(std::string(e.what()).find("opcode 0x8f"), std::string::npos) << e.what();
  }
  EXPECT_THROW(codec.decode(unhex("80048c0568")), SerializationError);
  // 2**64 does not fit 64 bits.
  EXPECT_THROW(codec.decode(unhex("80048a090000000000000000012e")), SerializationError);
}

TEST(MeshMsgpack, RoundTrips) {
  MsgpackCodec codec;
  Value v = python_value();
  // msgpack has no tuple: a Tuple comes back as a List.
  Value expected = v;
  for (auto& [k, val] : expected.as<Dict>().items)
    if (val.is<Tuple>()) val = List(val.as<Tuple>().items);
  EXPECT_EQ(codec.decode(codec.encode(v)), expected);
  EXPECT_THROW(codec.decode(std::string("\xc1", 1)), SerializationError);
}

TEST(MeshCodec, ByName) {
  EXPECT_EQ(codec_by_name("pickle")->name(), "pickle");
  EXPECT_EQ(codec_by_name("msgpack")->name(), "msgpack");
  EXPECT_THROW(codec_by_name("json"), InvalidArgumentError);
}
