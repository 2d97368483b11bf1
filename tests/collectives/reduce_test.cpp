// The reduction kernels against plain loops: every dtype x op, odd lengths, half-precision
// rounding.
#include <gtest/gtest.h>

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
