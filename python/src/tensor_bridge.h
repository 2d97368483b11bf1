// torch.Tensor and numpy.ndarray <-> wcomm::Tensor without copies. Sending borrows the
// array's own memory (the caller keeps the array alive until the send completes); receiving
// wraps the buffer the core read the segment into (DLPack for torch, a base object for numpy)
// and keeps that buffer alive for as long as the Python tensor lives.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>

#include "wcomm/tensor.h"

namespace wcomm::python {

namespace py = pybind11;

// What received tensors become.
enum class TensorMode : std::uint8_t {
  kAuto,   // torch when importable, else numpy
  kTorch,
  kNumpy,
};

// A torch tensor or numpy array as a borrowed wcomm::Tensor; nullopt if obj is neither.
// Throws UnsupportedPayloadError (saying what to call) for a non-CPU, non-contiguous,
// non-dense, byte-swapped or unsupported-dtype array.
std::optional<Tensor> tensor_from_python(py::handle obj);

// A received tensor as a torch tensor or numpy array over the same memory.
py::object tensor_to_python(const Tensor& tensor, TensorMode mode);

}  // namespace wcomm::python
