// Contiguous memory (Buffer) and dense C-contiguous tensors (Tensor) that travel without copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace wcomm {

// Alignment of every buffer wcomm allocates (cache line, and enough for any vector unit).
inline constexpr std::size_t kBufferAlignment = 64;

// A run of bytes that wcomm either owns (shared, reference counted) or borrows.
//
// Lifetime rule for borrowed memory: Buffer::borrow keeps nothing alive. When a value that
// holds borrowed memory is passed to Comm::send, the caller must keep that memory valid and
// unmodified until the send's Future is ready (completed, failed, timed out or cancelled);
// wcomm never touches it after that. Use Buffer::share to hand wcomm an owner to keep alive
// instead.
class Buffer {
 public:
  Buffer() = default;
  // Fresh, uninitialised, kBufferAlignment-aligned storage owned by the Buffer.
  static Buffer allocate(std::size_t size);
  // Fresh owned storage holding a copy of data.
  static Buffer copy_of(const void* data, std::size_t size);
  // Caller's memory, not kept alive (see the lifetime rule above).
  static Buffer borrow(const void* data, std::size_t size);
  // Caller's memory kept alive by owner for as long as any copy of this Buffer exists.
  static Buffer share(std::shared_ptr<const void> owner, const void* data, std::size_t size);

  std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool borrowed() const { return !owner_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  const std::shared_ptr<const void>& owner() const { return owner_; }

  friend bool operator==(const Buffer& a, const Buffer& b);

 private:
  Buffer(std::shared_ptr<const void> owner, std::uint8_t* data, std::size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}
  std::shared_ptr<const void> owner_;
  std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

enum class DType : std::uint8_t {
  kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64, kBool,
};
inline constexpr int kMaxTensorDims = 64;

std::string_view dtype_name(DType dtype);          // the wire name, e.g. "float32"
std::optional<DType> parse_dtype(std::string_view name);
std::size_t dtype_itemsize(DType dtype);

using Shape = std::vector<std::int64_t>;

// A dense, C-contiguous, little-endian tensor on the CPU.
class Tensor {
 public:
  Tensor() = default;
  // Owned, 64-byte-aligned, uninitialised storage.
  static Tensor empty(DType dtype, Shape shape);
  // Owned storage filled with zero bytes.
  static Tensor zeros(DType dtype, Shape shape);
  // Borrowed caller memory (Buffer's lifetime rule applies).
  static Tensor borrow(const void* data, DType dtype, Shape shape);
  // A tensor over buffer, whose size must be exactly numel * itemsize (throws
  // InvalidArgumentError otherwise).
  static Tensor from_buffer(Buffer buffer, DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::size_t numel() const;
  std::size_t nbytes() const { return buffer_.size(); }
  std::uint8_t* data() const { return buffer_.data(); }
  template <class T>
  T* data_as() const { return reinterpret_cast<T*>(buffer_.data()); }
  const Buffer& buffer() const { return buffer_; }

  friend bool operator==(const Tensor& a, const Tensor& b);

 private:
  Tensor(Buffer buffer, DType dtype, Shape shape)
      : buffer_(std::move(buffer)), dtype_(dtype), shape_(std::move(shape)) {}
  Buffer buffer_;
  DType dtype_ = DType::kUInt8;
  Shape shape_;
};

// Checked numel * itemsize for a shape; nullopt on a negative dimension, more than
// kMaxTensorDims dimensions, or overflow.
std::optional<std::size_t> tensor_nbytes(DType dtype, const Shape& shape);

// Hook that hands out storage for received tensors (the Python layer hands out torch or
// numpy storage). It must return a buffer of exactly nbytes bytes.
using BufferAllocator = std::function<Buffer(std::size_t nbytes)>;

}  // namespace wcomm
