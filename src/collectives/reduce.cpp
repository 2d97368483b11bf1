// The reduction kernels: one plain loop per (dtype, op), instantiated from templates so the
// compiler vectorises each; no per-element dispatch.
#include "wcomm/collectives/reduce.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "wcomm/errors.h"

namespace wcomm {
namespace {

constexpr std::array<std::string_view, 7> kOpNames = {"sum", "prod", "min", "max", "xor", "and", "or"};

// float16 / bfloat16 <-> float32 by bit manipulation, every branch written as a select so the
// loops vectorise (GCC does not vectorise _Float16 conversions, even with F16C).
inline float as_float(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline std::uint32_t as_bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

inline float bf16_to_float(std::uint16_t h) { return as_float(static_cast<std::uint32_t>(h) << 16); }
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t bits = as_bits(f);
  // Round to nearest even; NaN stays NaN (its payload's top bit is kept by the quiet bit).
  const std::uint32_t rounded = bits + 0x7FFF + ((bits >> 16) & 1);
  const bool nan = (bits & 0x7FFFFFFF) > 0x7F800000;
  return static_cast<std::uint16_t>(nan ? (bits >> 16) | 0x40 : rounded >> 16);
}

// IEEE binary16 (after F. Giesen's half_to_float / float_to_half_fast3_rtne).
inline float f16_to_float(std::uint16_t h) {
  constexpr std::uint32_t kExp = 0x7C00u << 13;  // the exponent, moved to float's place
  const std::uint32_t moved = static_cast<std::uint32_t>(h & 0x7FFF) << 13;
  const std::uint32_t exp = moved & kExp;
  const std::uint32_t normal = moved + ((127u - 15u) << 23);
  const std::uint32_t inf_nan = normal + ((128u - 16u) << 23);
  // A subnormal (or zero): let float arithmetic renormalise it.
  const std::uint32_t subnormal = as_bits(as_float(normal + (1u << 23)) - as_float(113u << 23));
  const std::uint32_t magnitude = exp == kExp ? inf_nan : exp == 0 ? subnormal : normal;
  return as_float(magnitude | static_cast<std::uint32_t>(h & 0x8000) << 16);
}
inline std::uint16_t float_to_f16(float f) {
  constexpr std::uint32_t kInfinity = 255u << 23;
  constexpr std::uint32_t kOverflow = (127u + 16u) << 23;  // 65536: rounds to infinity and above
  constexpr std::uint32_t kSubnormalMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  const std::uint32_t bits = as_bits(f);
  const std::uint32_t sign = (bits >> 16) & 0x8000;
  const std::uint32_t abs = bits & 0x7FFFFFFF;
  const std::uint32_t inf_nan = abs > kInfinity ? 0x7E00 : 0x7C00;
  // Below 2^-14 the result is subnormal: adding the magic number rounds (to nearest even) at
  // float16's last subnormal bit, and the low bits are then the result.
  const std::uint32_t subnormal = as_bits(as_float(abs) + as_float(kSubnormalMagic)) - kSubnormalMagic;
  const std::uint32_t normal = (abs + ((15u - 127u) << 23) + 0xFFF + ((abs >> 13) & 1)) >> 13;
  const std::uint32_t magnitude = abs >= kOverflow ? inf_nan : abs < (113u << 23) ? subnormal : normal;
  return static_cast<std::uint16_t>(magnitude | sign);
}

// min / max of two half-precision values compared as floats, on their 16-bit patterns: both
// formats are sign and magnitude, so the magnitude with the sign applied orders them (and
// makes -0 equal +0). As with floats, a NaN on either side keeps dst.
template <ReduceOp Op, bool kBf16>
[[gnu::always_inline]] inline std::uint16_t half_min_max(std::uint16_t a, std::uint16_t b) {
  constexpr std::int32_t kInfinity = kBf16 ? 0x7F80 : 0x7C00;
  const std::int32_t ma = a & 0x7FFF, mb = b & 0x7FFF;
  const std::int32_t ka = (a & 0x8000) ? -ma : ma, kb = (b & 0x8000) ? -mb : mb;
  const bool ordered = ma <= kInfinity && mb <= kInfinity;
  const bool take_b = ordered && (Op == ReduceOp::kMin ? kb < ka : ka < kb);
  return take_b ? b : a;
}

// The type integer arithmetic runs in: unsigned for signed integers, T otherwise.
template <class T, bool = std::is_integral_v<T>&& std::is_signed_v<T>>
struct Wrap { using type = T; };
template <class T>
struct Wrap<T, true> { using type = std::make_unsigned_t<T>; };

template <ReduceOp Op, class T>
[[gnu::always_inline]] inline T apply(T a, T b) {
  // Signed integers wrap like the hardware does (through unsigned: no undefined overflow).
  using W = typename Wrap<T>::type;
  if constexpr (Op == ReduceOp::kSum) return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
  else if constexpr (Op == ReduceOp::kProd) return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
  else if constexpr (Op == ReduceOp::kMin) return b < a ? b : a;
  else if constexpr (Op == ReduceOp::kMax) return a < b ? b : a;
  else if constexpr (Op == ReduceOp::kBitXor) return static_cast<T>(a ^ b);
  else if constexpr (Op == ReduceOp::kBitAnd) return static_cast<T>(a & b);
  else return static_cast<T>(a | b);
}

template <ReduceOp Op, class T>
[[gnu::always_inline]] inline void loop(void* dst_v, const void* src_v, std::size_t n) {
  T* __restrict dst = static_cast<T*>(dst_v);
  const T* __restrict src = static_cast<const T*>(src_v);
  for (std::size_t i = 0; i < n; ++i) dst[i] = apply<Op>(dst[i], src[i]);
}

// Half-precision arithmetic: widen, compute in float, round back (min and max compare the
// 16-bit patterns).
template <ReduceOp Op, bool kBf16>
[[gnu::always_inline]] inline void half_loop(void* dst_v, const void* src_v, std::size_t n) {
  auto* __restrict dst = static_cast<std::uint16_t*>(dst_v);
  const auto* __restrict src = static_cast<const std::uint16_t*>(src_v);
  if constexpr (Op == ReduceOp::kMin || Op == ReduceOp::kMax) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = half_min_max<Op, kBf16>(dst[i], src[i]);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      float a = kBf16 ? bf16_to_float(dst[i]) : f16_to_float(dst[i]);
      float b = kBf16 ? bf16_to_float(src[i]) : f16_to_float(src[i]);
      float r = apply<Op>(a, b);
      dst[i] = kBf16 ? float_to_bf16(r) : float_to_f16(r);
    }
  }
}

// The unsigned type of a dtype's width, for bitwise operators on any dtype.
template <ReduceOp Op>
[[gnu::always_inline]] inline void bitwise(void* dst, const void* src, std::size_t n, std::size_t itemsize) {
  switch (itemsize) {
    case 1: return loop<Op, std::uint8_t>(dst, src, n);
    case 2: return loop<Op, std::uint16_t>(dst, src, n);
    case 4: return loop<Op, std::uint32_t>(dst, src, n);
    default: return loop<Op, std::uint64_t>(dst, src, n);
  }
}

template <ReduceOp Op>
[[gnu::always_inline]] inline void arithmetic(void* dst, const void* src, std::size_t n, DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return loop<Op, std::uint8_t>(dst, src, n);
    case DType::kInt8: return loop<Op, std::int8_t>(dst, src, n);
    case DType::kInt32: return loop<Op, std::int32_t>(dst, src, n);
    case DType::kInt64: return loop<Op, std::int64_t>(dst, src, n);
    case DType::kFloat32: return loop<Op, float>(dst, src, n);
    case DType::kFloat64: return loop<Op, double>(dst, src, n);
    case DType::kFloat16: return half_loop<Op, false>(dst, src, n);
    case DType::kBFloat16: return half_loop<Op, true>(dst, src, n);
    default: return;
  }
}

// One entry point per instruction set: x86-64 gets an AVX2 clone chosen at load time. By
// feature, not "arch=haswell": that resolver asks for the CPU model (an AMD EPYC with AVX2 got
// the SSE2 clone). Not under the sanitizers: the clone's resolver runs before their runtimes start (under TSan
// it crashes the program while it loads).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define WCOMM_KERNEL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define WCOMM_KERNEL_CLONES
#endif

WCOMM_KERNEL_CLONES
void dispatch(void* dst, const void* src, std::size_t n, DType dtype, ReduceOp op, std::size_t itemsize) {
  switch (op) {
    case ReduceOp::kSum: return arithmetic<ReduceOp::kSum>(dst, src, n, dtype);
    case ReduceOp::kProd: return arithmetic<ReduceOp::kProd>(dst, src, n, dtype);
    case ReduceOp::kMin: return arithmetic<ReduceOp::kMin>(dst, src, n, dtype);
    case ReduceOp::kMax: return arithmetic<ReduceOp::kMax>(dst, src, n, dtype);
    case ReduceOp::kBitXor: return bitwise<ReduceOp::kBitXor>(dst, src, n, itemsize);
    case ReduceOp::kBitAnd: return bitwise<ReduceOp::kBitAnd>(dst, src, n, itemsize);
    case ReduceOp::kBitOr: return bitwise<ReduceOp::kBitOr>(dst, src, n, itemsize);
  }
}

}  // namespace

std::string_view reduce_op_name(ReduceOp op) { return kOpNames.at(static_cast<std::size_t>(op)); }

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (std::size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == name) return static_cast<ReduceOp>(i);
  if (name == "bxor") return ReduceOp::kBitXor;
  if (name == "band") return ReduceOp::kBitAnd;
  if (name == "bor") return ReduceOp::kBitOr;
  return std::nullopt;
}

bool reducible(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: case DType::kInt8: case DType::kInt32: case DType::kInt64:
    case DType::kFloat16: case DType::kBFloat16: case DType::kFloat32: case DType::kFloat64:
      return true;
    default:
      return false;
  }
}

void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  if (!reducible(dtype))
    throw InvalidArgumentError("cannot reduce " + std::string(dtype_name(dtype)) +
                               " tensors: use uint8, int8, int32, int64, float16, bfloat16, float32 or float64");
  if (count == 0) return;
  dispatch(dst, src, count, dtype, op, dtype_itemsize(dtype));
}

}  // namespace wcomm
