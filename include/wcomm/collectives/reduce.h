// Reduction operators and the element-wise kernels that collectives apply to received data:
// dst[i] = dst[i] op src[i], for every dtype wcomm carries.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "wcomm/tensor.h"

namespace wcomm {

enum class ReduceOp : std::uint8_t { kSum, kProd, kMin, kMax, kBitXor, kBitAnd, kBitOr };

std::string_view reduce_op_name(ReduceOp op);  // "sum", "prod", "min", "max", "xor", "and", "or"
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

// dst[i] = dst[i] op src[i] for count elements of dtype. float16 and bfloat16 are computed in
// float32 and rounded back (to nearest even) after each operation; their min and max pick
// what a float comparison picks. Bitwise operators work on the bits of any dtype (floats
// included). The loops are plain templates the compiler vectorises (on x86-64 an AVX2 clone
// is picked at run time where the CPU has AVX2).
// Throws InvalidArgumentError for a dtype without a kernel (bool, int16: sum etc. of those
// are not offered).
void reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op);

// Whether reduce_into accepts dtype.
bool reducible(DType dtype);

}  // namespace wcomm
