// Buffer (owned 64-byte-aligned, shared, or borrowed memory), dtypes, and Tensor factories.
#include "wcomm/tensor.h"

#include <array>
#include <cstring>
#include <new>

#include "core/block_cache.h"
#include "core/describe.h"
#include "wcomm/errors.h"

namespace wcomm {

Buffer Buffer::allocate(std::size_t size) {
  // Even a zero-byte buffer gets real (owned) storage so that allocate() results are never
  // mistaken for borrowed memory.
  if (size >= BlockCache::kMinBlockBytes) {
    void* p = BlockCache::instance().take(size);
    if (!p) p = BlockCache::allocate_block(size);
    std::shared_ptr<void> owner(p, [size](void* q) { BlockCache::instance().give(q, size); });
    return Buffer(std::move(owner), static_cast<std::uint8_t*>(p), size);
  }
  // Storage and shared_ptr control block in one plain allocation (the allocator's fast path;
  // aligned operator new is several times slower), aligned by hand.
  auto block = std::make_shared_for_overwrite<std::uint8_t[]>(size + kBufferAlignment - 1);
  auto address = reinterpret_cast<std::uintptr_t>(block.get());
  auto* data = reinterpret_cast<std::uint8_t*>((address + kBufferAlignment - 1) & ~std::uintptr_t{kBufferAlignment - 1});
  return Buffer(std::shared_ptr<void>(std::move(block), data), data, size);
}

Buffer Buffer::copy_of(const void* data, std::size_t size) {
  Buffer out = allocate(size);
  if (size) std::memcpy(out.data_, data, size);
  return out;
}

Buffer Buffer::borrow(const void* data, std::size_t size) {
  return Buffer(nullptr, static_cast<std::uint8_t*>(const_cast<void*>(data)), size);
}

Buffer Buffer::share(std::shared_ptr<const void> owner, const void* data, std::size_t size) {
  return Buffer(std::move(owner), static_cast<std::uint8_t*>(const_cast<void*>(data)), size);
}

bool operator==(const Buffer& a, const Buffer& b) {
  if (a.size_ != b.size_) return false;
  if (a.data_ == b.data_ || a.size_ == 0) return true;
  return std::memcmp(a.data_, b.data_, a.size_) == 0;
}

namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t itemsize;
};

// Wire names of docs/wire-format.md, in DType order.
constexpr std::array<DTypeInfo, 10> kDTypes = {{
    {DType::kUInt8, "uint8", 1},
    {DType::kInt8, "int8", 1},
    {DType::kInt16, "int16", 2},
    {DType::kInt32, "int32", 4},
    {DType::kInt64, "int64", 8},
    {DType::kFloat16, "float16", 2},
    {DType::kBFloat16, "bfloat16", 2},
    {DType::kFloat32, "float32", 4},
    {DType::kFloat64, "float64", 8},
    {DType::kBool, "bool", 1},
}};

const DTypeInfo& info(DType dtype) {
  auto i = static_cast<std::size_t>(dtype);
  if (i >= kDTypes.size()) throw InvalidArgumentError("invalid DType value " + std::to_string(i));
  return kDTypes[i];
}

}  // namespace

std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

std::size_t dtype_itemsize(DType dtype) { return info(dtype).itemsize; }

std::optional<std::size_t> tensor_nbytes(DType dtype, const Shape& shape) {
  if (shape.size() > static_cast<std::size_t>(kMaxTensorDims)) return std::nullopt;
  bool has_zero = false;
  for (auto d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) has_zero = true;
  }
  // A zero dimension makes the tensor empty however large the others are (numpy agrees).
  if (has_zero) return 0;
  std::size_t n = dtype_itemsize(dtype);
  for (auto d : shape) {
    if (static_cast<std::uint64_t>(d) > SIZE_MAX) return std::nullopt;
    if (__builtin_mul_overflow(n, static_cast<std::size_t>(d), &n)) return std::nullopt;
  }
  return n;
}

namespace {

std::size_t checked_nbytes(DType dtype, const Shape& shape) {
  auto n = tensor_nbytes(dtype, shape);
  if (!n)
    throw InvalidArgumentError("invalid tensor shape " + detail::describe_tensor_type(dtype, shape) +
                               ": dimensions must be non-negative, at most " +
                               std::to_string(kMaxTensorDims) + " of them, and the size must fit in memory");
  return *n;
}

}  // namespace

std::size_t Tensor::numel() const {
  std::size_t n = 1;
  for (auto d : shape_) n *= static_cast<std::size_t>(d);
  return n;
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  std::size_t n = checked_nbytes(dtype, shape);
  return Tensor(Buffer::allocate(n), dtype, std::move(shape));
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t = empty(dtype, std::move(shape));
  if (t.nbytes()) std::memset(t.data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::borrow(const void* data, DType dtype, Shape shape) {
  std::size_t n = checked_nbytes(dtype, shape);
  if (!data && n)
    throw InvalidArgumentError("Tensor::borrow got a null pointer for " +
                               detail::describe_tensor_type(dtype, shape));
  return Tensor(Buffer::borrow(data, n), dtype, std::move(shape));
}

Tensor Tensor::from_buffer(Buffer buffer, DType dtype, Shape shape) {
  std::size_t n = checked_nbytes(dtype, shape);
  if (buffer.size() != n)
    throw InvalidArgumentError("buffer of " + std::to_string(buffer.size()) + " bytes cannot hold tensor " +
                               detail::describe_tensor_type(dtype, shape) + ", which needs " +
                               std::to_string(n) + " bytes");
  if (!buffer.data() && n) throw InvalidArgumentError("Tensor::from_buffer got a buffer with no memory");
  return Tensor(std::move(buffer), dtype, std::move(shape));
}

bool operator==(const Tensor& a, const Tensor& b) {
  return a.dtype_ == b.dtype_ && a.shape_ == b.shape_ && a.buffer_ == b.buffer_;
}

}  // namespace wcomm
