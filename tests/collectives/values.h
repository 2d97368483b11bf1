// Test helpers: small integers written as any reducible dtype, read back, and the reference
// result of a reduction over ranks computed with plain loops.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "wcomm/collectives/reduce.h"

namespace wcomm::test {

inline const std::vector<DType> kDTypes = {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64,
                                           DType::kInt8,    DType::kInt32,    DType::kInt64,   DType::kUInt8};
inline const std::vector<ReduceOp> kOps = {ReduceOp::kSum,    ReduceOp::kProd,   ReduceOp::kMin, ReduceOp::kMax,
                                           ReduceOp::kBitXor, ReduceOp::kBitAnd, ReduceOp::kBitOr};

// Rank r's element i: a small integer, so every order of sums and products is exact.
inline int value_of(DType dtype, int rank, std::size_t i) {
  int v = static_cast<int>((rank * 7 + i * 3 + i / 11) % 5);
  return dtype == DType::kUInt8 ? v % 3 + 1 : v - 2;
}

inline void put(DType dtype, void* p, double v) {
  switch (dtype) {
    case DType::kUInt8: *static_cast<std::uint8_t*>(p) = static_cast<std::uint8_t>(v); break;
    case DType::kInt8: *static_cast<std::int8_t*>(p) = static_cast<std::int8_t>(v); break;
    case DType::kInt32: *static_cast<std::int32_t*>(p) = static_cast<std::int32_t>(v); break;
    case DType::kInt64: *static_cast<std::int64_t*>(p) = static_cast<std::int64_t>(v); break;
    case DType::kFloat32: *static_cast<float*>(p) = static_cast<float>(v); break;
    case DType::kFloat64: *static_cast<double*>(p) = v; break;
    case DType::kFloat16: {
      _Float16 h = static_cast<_Float16>(v);
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::kBFloat16: {
      float f = static_cast<float>(v);  // small integers: the top 16 bits are exact
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      std::uint16_t top = static_cast<std::uint16_t>(bits >> 16);
      std::memcpy(p, &top, 2);
      break;
    }
    default: break;
  }
}

inline double get(DType dtype, const void* p) {
  switch (dtype) {
    case DType::kUInt8: return *static_cast<const std::uint8_t*>(p);
    case DType::kInt8: return *static_cast<const std::int8_t*>(p);
    case DType::kInt32: return *static_cast<const std::int32_t*>(p);
    case DType::kInt64: return static_cast<double>(*static_cast<const std::int64_t*>(p));
    case DType::kFloat32: return *static_cast<const float*>(p);
    case DType::kFloat64: return *static_cast<const double*>(p);
    case DType::kFloat16: {
      _Float16 h;
      std::memcpy(&h, p, 2);
      return static_cast<double>(h);
    }
    case DType::kBFloat16: {
      std::uint16_t top;
      std::memcpy(&top, p, 2);
      std::uint32_t bits = static_cast<std::uint32_t>(top) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default: return 0;
  }
}

inline std::uint64_t bits_of(const void* p, std::size_t itemsize) {
  std::uint64_t b = 0;
  std::memcpy(&b, p, itemsize);
  return b;
}

// Fills rank's data for n elements.
inline std::vector<std::uint8_t> make_data(DType dtype, int rank, std::size_t n) {
  std::size_t item = dtype_itemsize(dtype);
  std::vector<std::uint8_t> out(n * item);
  for (std::size_t i = 0; i < n; ++i) put(dtype, out.data() + i * item, value_of(dtype, rank, i));
  return out;
}

// True if got[i] is op over ranks 0..world-1 of element i, for every i in [begin, end)
// (got holds elements begin..end-1). Arithmetic is compared by value, bitwise by bits.
inline bool matches_reference(DType dtype, ReduceOp op, int world, std::size_t begin, std::size_t end,
                              const std::uint8_t* got, std::string* why) {
  std::size_t item = dtype_itemsize(dtype);
  std::vector<std::uint8_t> one(item);
  for (std::size_t i = begin; i < end; ++i) {
    const std::uint8_t* g = got + (i - begin) * item;
    bool ok;
    if (op == ReduceOp::kBitXor || op == ReduceOp::kBitAnd || op == ReduceOp::kBitOr) {
      std::uint64_t acc = 0;
      for (int r = 0; r < world; ++r) {
        put(dtype, one.data(), value_of(dtype, r, i));
        std::uint64_t b = bits_of(one.data(), item);
        acc = r == 0 ? b : op == ReduceOp::kBitXor ? acc ^ b : op == ReduceOp::kBitAnd ? acc & b : acc | b;
      }
      ok = bits_of(g, item) == acc;
    } else {
      double acc = value_of(dtype, 0, i);
      for (int r = 1; r < world; ++r) {
        double v = value_of(dtype, r, i);
        acc = op == ReduceOp::kSum ? acc + v : op == ReduceOp::kProd ? acc * v : op == ReduceOp::kMin ? std::min(acc, v)
                                                                                                      : std::max(acc, v);
      }
      ok = get(dtype, g) == acc;
    }
    if (!ok) {
      if (why) *why = "element " + std::to_string(i) + " is " + std::to_string(get(dtype, g));
      return false;
    }
  }
  return true;
}

}  // namespace wcomm::test
