// The reduction kernels against plain loops: every dtype x op, odd lengths, half-precision
// rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "values.h"
#include "wcomm/errors.h"

namespace wcomm::test {
namespace {

TEST(Reduce, EveryDtypeAndOpMatchesPlainLoops) {
  for (DType dtype : kDTypes)
    for (ReduceOp op : kOps)
      for (std::size_t n : {1u, 3u, 17u, 1000u}) {
        for (int world = 2; world <= 5; ++world) {
          auto acc = make_data(dtype, 0, n);
          for (int r = 1; r < world; ++r) {
            auto src = make_data(dtype, r, n);
            reduce_into(acc.data(), src.data(), n, dtype, op);
          }
          std::string why;
          EXPECT_TRUE(matches_reference(dtype, op, world, 0, n, acc.data(), &why))
              << dtype_name(dtype) << " " << reduce_op_name(op) << " n=" << n << " world=" << world << ": " << why;
        }
      }
}

TEST(Reduce, HalfPrecisionRoundsToNearestEven) {
  // bfloat16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even gives 1.
  std::uint16_t a = 0x3F80, b = 0x3B80;  // 1.0, 2^-8
  reduce_into(&a, &b, 1, DType::kBFloat16, ReduceOp::kSum);
  EXPECT_EQ(a, 0x3F80);
  // float16: 2048 + 1 = 2049 is not representable; ties to even gives 2048.
  _Float16 x = 2048, y = 1;
  reduce_into(&x, &y, 1, DType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(static_cast<float>(x), 2048.0f);
}

std::uint16_t f16_bits(_Float16 h) {
  std::uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
_Float16 f16_of(std::uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return h;
}

// The kernel's result for every element against the compiler's own float16 arithmetic (widen
// to float, compute, round to nearest even); NaN only has to stay NaN.
void expect_float16_like_compiler(ReduceOp op, const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
  std::vector<std::uint16_t> got = a;
  reduce_into(got.data(), b.data(), got.size(), DType::kFloat16, op);
  int wrong = 0;
  for (std::size_t i = 0; i < a.size() && wrong < 5; ++i) {
    const float x = static_cast<float>(f16_of(a[i])), y = static_cast<float>(f16_of(b[i]));
    const _Float16 want = static_cast<_Float16>(op == ReduceOp::kSum ? x + y : x * y);
    const bool ok = std::isnan(static_cast<float>(want)) ? std::isnan(static_cast<float>(f16_of(got[i])))
                                                          : got[i] == f16_bits(want);
    if (!ok) {
      ++wrong;
      ADD_FAILURE() << reduce_op_name(op) << " of float16 0x" << std::hex << a[i] << " and 0x" << b[i] << " gave 0x"
                    << got[i] << ", not 0x" << f16_bits(want);
    }
  }
}

std::vector<std::uint16_t> random_halves(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> bits(0, 0xFFFF);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = static_cast<std::uint16_t>(bits(gen));
  return v;
}

TEST(Reduce, Float16ConvertsEveryValueAndRoundsLikeTheCompiler) {
  // Every float16 plus -0 (exact: converts each value to float and back, subnormals, infinities
  // and NaNs included), then random pairs: sums and products that round, overflow to
  // infinity, and land in the subnormals.
  std::vector<std::uint16_t> all(1 << 16), minus_zero(1 << 16, 0x8000), one(1 << 16, 0x3C00);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  expect_float16_like_compiler(ReduceOp::kSum, all, minus_zero);
  expect_float16_like_compiler(ReduceOp::kProd, all, one);
  const auto a = random_halves(200000, 1), b = random_halves(200000, 2);
  expect_float16_like_compiler(ReduceOp::kSum, a, b);
  expect_float16_like_compiler(ReduceOp::kProd, a, b);
  // Small magnitudes, so that products fall among the subnormals and round there.
  std::vector<std::uint16_t> small_a = a, small_b = b;
  for (auto& x : small_a) x = static_cast<std::uint16_t>((x & 0x83FF) | 0x1000);
  for (auto& x : small_b) x = static_cast<std::uint16_t>((x & 0x83FF) | 0x0C00);
  expect_float16_like_compiler(ReduceOp::kProd, small_a, small_b);
}

TEST(Reduce, HalfPrecisionMinAndMaxCompareAsFloats) {
  // min / max work on the 16-bit patterns: they must pick what a float comparison picks (-0
  // equals +0, a NaN on either side keeps dst), and return that operand's bits unchanged.
  auto a = random_halves(100000, 3), b = random_halves(100000, 4);
  const std::uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0x7F80,
                                    0xFF80, 0x7FC0, 0x7C01, 0x7BFF, 0xFBFF};
  for (std::uint16_t x : specials)
    for (std::uint16_t y : specials) {
      a.push_back(x);
      b.push_back(y);
    }
  for (DType dtype : {DType::kFloat16, DType::kBFloat16})
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      std::vector<std::uint16_t> got = a;
      reduce_into(got.data(), b.data(), got.size(), dtype, op);
      int wrong = 0;
      for (std::size_t i = 0; i < a.size() && wrong < 5; ++i) {
        const double x = get(dtype, &a[i]), y = get(dtype, &b[i]);
        const bool take_b = op == ReduceOp::kMin ? y < x : x < y;
        const std::uint16_t want = take_b ? b[i] : a[i];
        if (got[i] != want) {
          ++wrong;
          ADD_FAILURE() << dtype_name(dtype) << " " << reduce_op_name(op) << " of 0x" << std::hex << a[i] << " and 0x"
                        << b[i] << " gave 0x" << got[i] << ", not 0x" << want;
        }
      }
    }
}

TEST(Reduce, NamesRoundTripAndBadDtypeIsRefused) {
  for (ReduceOp op : kOps) EXPECT_EQ(parse_reduce_op(reduce_op_name(op)), op);
  EXPECT_FALSE(parse_reduce_op("average"));
  bool b = true;
  try {
    reduce_into(&b, &b, 1, DType::kBool, ReduceOp::kSum);
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("bool"), std::string::npos);
  }
}

}  // namespace
}  // namespace wcomm::test
