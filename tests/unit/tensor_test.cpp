// Tests of Buffer (owned, shared, borrowed), dtypes, tensor_nbytes and the Tensor factories.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "wcomm/errors.h"
#include "wcomm/tensor.h"

namespace wcomm {
namespace {

TEST(Buffer, AllocateIsAlignedAndOwned) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{4096}}) {
    Buffer b = Buffer::allocate(n);
    EXPECT_EQ(b.size(), n);
    EXPECT_NE(b.data(), nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % kBufferAlignment, 0u);
    EXPECT_FALSE(b.borrowed());
  }
}

TEST(Buffer, CopyOfCopies) {
  char src[] = "abcdef";
  Buffer b = Buffer::copy_of(src, 6);
  src[0] = 'z';
  EXPECT_EQ(b.view(), "abcdef");
  EXPECT_NE(b.data(), reinterpret_cast<std::uint8_t*>(src));
  EXPECT_EQ(Buffer::copy_of(nullptr, 0).size(), 0u);
}

TEST(Buffer, BorrowKeepsNothingAlive) {
  std::string s = "borrowed";
  Buffer b = Buffer::borrow(s.data(), s.size());
  EXPECT_TRUE(b.borrowed());
  EXPECT_EQ(b.data(), reinterpret_cast<std::uint8_t*>(s.data()));
  EXPECT_EQ(b.owner(), nullptr);
}

TEST(Buffer, ShareKeepsTheOwnerAlive) {
  std::weak_ptr<std::vector<int>> watch;
  Buffer b;
  {
    auto owner = std::make_shared<std::vector<int>>(4, 9);
    watch = owner;
    b = Buffer::share(owner, owner->data(), owner->size() * sizeof(int));
  }
  EXPECT_FALSE(watch.expired());
  EXPECT_FALSE(b.borrowed());
  EXPECT_EQ(reinterpret_cast<const int*>(b.data())[3], 9);
  Buffer copy = b;
  b = Buffer();
  EXPECT_FALSE(watch.expired());
  copy = Buffer();
  EXPECT_TRUE(watch.expired());
}

TEST(Buffer, EqualityComparesBytes) {
  Buffer a = Buffer::copy_of("xyz", 3);
  Buffer b = Buffer::copy_of("xyz", 3);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, Buffer::copy_of("xy", 2));
  EXPECT_NE(a, Buffer::copy_of("xyw", 3));
  EXPECT_EQ(Buffer(), Buffer::allocate(0));
}

TEST(DType, NamesItemsizesAndParsing) {
  const std::pair<DType, std::size_t> all[] = {
      {DType::kUInt8, 1}, {DType::kInt8, 1},     {DType::kInt16, 2},    {DType::kInt32, 4},   {DType::kInt64, 8},
      {DType::kFloat16, 2}, {DType::kBFloat16, 2}, {DType::kFloat32, 4}, {DType::kFloat64, 8}, {DType::kBool, 1},
  };
  for (auto [dtype, size] : all) {
    EXPECT_EQ(dtype_itemsize(dtype), size);
    EXPECT_EQ(parse_dtype(dtype_name(dtype)), dtype);
  }
  EXPECT_EQ(dtype_name(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(dtype_name(DType::kBool), "bool");
  EXPECT_FALSE(parse_dtype("float128").has_value());
  EXPECT_FALSE(parse_dtype("Float32").has_value());
  EXPECT_FALSE(parse_dtype("").has_value());
}

TEST(TensorNbytes, ChecksShape) {
  EXPECT_EQ(tensor_nbytes(DType::kFloat32, {3, 224, 224}), 3u * 224 * 224 * 4);
  EXPECT_EQ(tensor_nbytes(DType::kFloat64, {}), 8u);  // a scalar
  EXPECT_EQ(tensor_nbytes(DType::kUInt8, {0, 3}), 0u);
  EXPECT_EQ(tensor_nbytes(DType::kUInt8, {0, std::numeric_limits<std::int64_t>::max()}), 0u);
  EXPECT_FALSE(tensor_nbytes(DType::kUInt8, {2, -1}).has_value());
  EXPECT_FALSE(tensor_nbytes(DType::kInt64, {1ll << 32, 1ll << 31}).has_value());  // 2^66 bytes
  EXPECT_FALSE(tensor_nbytes(DType::kUInt8, {std::numeric_limits<std::int64_t>::max(), 3}).has_value());
  EXPECT_EQ(tensor_nbytes(DType::kUInt8, Shape(64, 1)), 1u);
  EXPECT_FALSE(tensor_nbytes(DType::kUInt8, Shape(65, 1)).has_value());
}

TEST(Tensor, EmptyAndZeros) {
  Tensor e = Tensor::empty(DType::kInt32, {2, 5});
  EXPECT_EQ(e.numel(), 10u);
  EXPECT_EQ(e.nbytes(), 40u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(e.data()) % kBufferAlignment, 0u);
  Tensor z = Tensor::zeros(DType::kFloat64, {3});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(z.data_as<double>()[i], 0.0);
  EXPECT_THROW(Tensor::zeros(DType::kUInt8, {-2}), InvalidArgumentError);
  EXPECT_THROW(Tensor::empty(DType::kUInt8, Shape(65, 1)), InvalidArgumentError);
}

TEST(Tensor, BorrowViewsCallerMemory) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::borrow(data, DType::kFloat32, {2, 3});
  EXPECT_EQ(t.data(), reinterpret_cast<std::uint8_t*>(data));
  EXPECT_TRUE(t.buffer().borrowed());
  data[5] = 60;
  EXPECT_EQ(t.data_as<float>()[5], 60.0f);
  EXPECT_THROW(Tensor::borrow(nullptr, DType::kFloat32, {2}), InvalidArgumentError);
  EXPECT_NO_THROW(Tensor::borrow(nullptr, DType::kFloat32, {0}));
}

TEST(Tensor, FromBufferChecksTheSize) {
  Buffer b = Buffer::allocate(24);
  Tensor t = Tensor::from_buffer(b, DType::kInt16, {3, 4});
  EXPECT_EQ(t.data(), b.data());
  try {
    (void)Tensor::from_buffer(b, DType::kFloat32, {2, 2});
    FAIL() << "expected InvalidArgumentError";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("float32[2,2]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("16"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::from_buffer(b, DType::kInt16, {-3, -4}), InvalidArgumentError);
}

TEST(Tensor, EqualityComparesTypeShapeAndBytes) {
  Tensor a = Tensor::zeros(DType::kInt32, {2, 2});
  Tensor b = Tensor::zeros(DType::kInt32, {2, 2});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, Tensor::zeros(DType::kFloat32, {2, 2}));
  EXPECT_NE(a, Tensor::zeros(DType::kInt32, {4}));
  b.data_as<std::int32_t>()[3] = 1;
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace wcomm

namespace wcomm {
namespace {

TEST(BlockCache, LargeBlocksAreReusedAndAligned) {
  const std::size_t size = 3u << 20;
  std::uint8_t* first;
  {
    Buffer a = Buffer::allocate(size);
    first = a.data();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % kBufferAlignment, 0u);
  }
  Buffer b = Buffer::allocate(size);  // the block just freed comes back
  EXPECT_EQ(b.data(), first);
  Buffer c = Buffer::allocate(size);  // in use: a fresh block
  EXPECT_NE(c.data(), first);
  Buffer small = Buffer::allocate(1024);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small.data()) % kBufferAlignment, 0u);
}

// The VmFlags line of /proc/self/smaps for the mapping that holds `address` ("" if none).
std::string vm_flags_at(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= at && at < hi;
    else if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(BlockCache, BlocksOfAHugePageAndMoreAreAdvisedForHugePages) {
  // Cross-memory attach pins a huge page at a time: a 64 MiB shm allreduce took 55 ms with
  // 4 KiB pages and 42 ms with these.
  Buffer big = Buffer::allocate(5u << 20);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.data()) % (2u << 20), 0u);
  EXPECT_NE(vm_flags_at(big.data()).find(" hg"), std::string::npos) << vm_flags_at(big.data());
  Buffer smaller = Buffer::allocate(1u << 20);  // below a huge page: left to the allocator
  EXPECT_EQ(vm_flags_at(smaller.data()).find(" hg"), std::string::npos) << vm_flags_at(smaller.data());
}

}  // namespace
}  // namespace wcomm
