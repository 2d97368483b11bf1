// torch / numpy <-> wcomm::Tensor (see tensor_bridge.h). Module objects are looked up once and
// kept for the life of the process (never destroyed: that would run after the interpreter).
#include "tensor_bridge.h"

#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>

#include <array>
#include <string>
#include <vector>

#include "errors_bridge.h"
#include "wcomm/errors.h"

namespace wcomm::python {
namespace {

constexpr std::array<const char*, 10> kTorchDTypeNames = {
    "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "bool"};
constexpr const char* kSupported =
    "uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64 and bool";

// A reference kept for the life of the process.
PyObject* keep(py::object o) { return o.release().ptr(); }

struct TorchLib {
  PyObject* tensor_type = nullptr;
  PyObject* strided = nullptr;
  PyObject* from_dlpack = nullptr;
  PyObject* dtype_to_wire = nullptr;  // dict: torch.dtype -> int(DType)
  PyObject* bool_dtype = nullptr;
};

struct NumpyLib {
  PyObject* ndarray_type = nullptr;
  std::array<PyObject*, 10> dtypes{};  // by DType; bfloat16 only with ml_dtypes
};

TorchLib* load_torch(py::module_ torch) {
  auto* lib = new TorchLib;
  lib->tensor_type = keep(torch.attr("Tensor"));
  lib->strided = keep(torch.attr("strided"));
  // torch._C._from_dlpack takes the capsule itself; torch.utils.dlpack.from_dlpack wraps it
  // with Python-level checks we do not need.
  py::module_ c = torch.attr("_C");
  lib->from_dlpack = keep(py::hasattr(c, "_from_dlpack") ? py::object(c.attr("_from_dlpack"))
                                                          : py::module_::import("torch.utils.dlpack").attr("from_dlpack"));
  py::dict map;
  for (std::size_t i = 0; i < kTorchDTypeNames.size(); ++i) map[torch.attr(kTorchDTypeNames[i])] = py::int_(i);
  lib->dtype_to_wire = keep(map);
  lib->bool_dtype = keep(torch.attr("bool"));
  return lib;
}

// Senders only meet torch tensors if torch is already imported: no import on the send path.
TorchLib* torch_if_imported() {
  static TorchLib* lib = nullptr;
  if (lib) return lib;
  PyObject* modules = PyImport_GetModuleDict();
  PyObject* torch = PyDict_GetItemString(modules, "torch");  // borrowed
  if (!torch || !PyObject_HasAttrString(torch, "Tensor")) return nullptr;  // absent, or mid-import
  lib = load_torch(py::reinterpret_borrow<py::module_>(torch));
  return lib;
}

// Receivers import torch on the first tensor (nullptr if it cannot be imported).
TorchLib* torch_importing() {
  static bool tried = false;
  static TorchLib* lib = nullptr;
  if (lib || tried) return lib;
  if ((lib = torch_if_imported())) return lib;
  tried = true;
  try {
    lib = load_torch(py::module_::import("torch"));
  } catch (const py::error_already_set&) {
    PyErr_Clear();
  }
  return lib;
}

NumpyLib* load_numpy() {
  auto* lib = new NumpyLib;
  py::module_ np = py::module_::import("numpy");
  lib->ndarray_type = keep(np.attr("ndarray"));
  for (std::size_t i = 0; i < kTorchDTypeNames.size(); ++i) {
    if (static_cast<DType>(i) == DType::kBFloat16) continue;
    lib->dtypes[i] = keep(np.attr("dtype")(kTorchDTypeNames[i]));
  }
  // numpy has no bfloat16 of its own; ml_dtypes adds one where it is installed.
  try {
    lib->dtypes[static_cast<int>(DType::kBFloat16)] =
        keep(np.attr("dtype")(py::module_::import("ml_dtypes").attr("bfloat16")));
  } catch (const py::error_already_set&) {
    PyErr_Clear();
  }
  return lib;
}

NumpyLib* numpy_if_imported() {
  static NumpyLib* lib = nullptr;
  if (lib) return lib;
  PyObject* np = PyDict_GetItemString(PyImport_GetModuleDict(), "numpy");
  if (!np || !PyObject_HasAttrString(np, "ndarray")) return nullptr;
  lib = load_numpy();
  return lib;
}

NumpyLib& numpy_lib() {
  static NumpyLib* lib = nullptr;
  if (!lib) lib = numpy_if_imported();
  if (!lib) lib = load_numpy();
  return *lib;
}

[[noreturn]] void unsupported(const std::string& message) { raise_error(ErrorCode::kUnsupportedPayload, message); }

std::string shape_text(py::handle obj) { return py::str(py::tuple(obj.attr("shape"))).cast<std::string>(); }

Tensor from_torch(py::handle t, const TorchLib& torch) {
  py::object device = t.attr("device");
  if (device.attr("type").cast<std::string>() != "cpu")
    unsupported("cannot send a torch.Tensor on device '" + py::str(device).cast<std::string>() +
                "': only CPU tensors travel; call .cpu() on it first");
  py::object layout = t.attr("layout");
  if (!layout.is(py::handle(torch.strided)))
    unsupported("cannot send a torch.Tensor with layout " + py::str(layout).cast<std::string>() +
                ": only dense tensors travel; call .to_dense() on it first");
  py::object dtype = t.attr("dtype");
  PyObject* wire = PyDict_GetItem(torch.dtype_to_wire, dtype.ptr());  // borrowed
  if (!wire)
    unsupported("cannot send a torch.Tensor of dtype " + py::str(dtype).cast<std::string>() +
                ": supported dtypes are " + kSupported + "; convert it with .to(...) first");
  if (!t.attr("is_contiguous")().cast<bool>())
    unsupported("cannot send a non-contiguous torch.Tensor (shape " + shape_text(t) + ", strides " +
                py::str(t.attr("stride")()).cast<std::string>() +
                "): only C-contiguous tensors travel without a copy; call .contiguous() on it first");
  auto data = t.attr("data_ptr")().cast<std::uintptr_t>();
  Shape shape;
  for (py::handle d : py::tuple(t.attr("shape"))) shape.push_back(d.cast<std::int64_t>());
  return Tensor::borrow(reinterpret_cast<const void*>(data), static_cast<DType>(PyLong_AsLong(wire)),
                        std::move(shape));
}

Tensor from_numpy(py::handle obj, const NumpyLib& np) {
  auto a = py::reinterpret_borrow<py::array>(obj);
  py::dtype dt = a.dtype();
  std::optional<DType> dtype;
  for (std::size_t i = 0; i < np.dtypes.size(); ++i)
    if (np.dtypes[i] && PyObject_RichCompareBool(dt.ptr(), np.dtypes[i], Py_EQ) == 1) dtype = static_cast<DType>(i);
  if (!dtype) {
    // The same type in the other byte order is the one mistake with an easy fix.
    py::object native = dt.attr("newbyteorder")("=");
    for (std::size_t i = 0; i < np.dtypes.size(); ++i)
      if (np.dtypes[i] && PyObject_RichCompareBool(native.ptr(), np.dtypes[i], Py_EQ) == 1)
        unsupported("cannot send a numpy.ndarray of byte-swapped dtype " + py::str(dt).cast<std::string>() +
                    ": tensors travel little-endian; call a.astype(a.dtype.newbyteorder('=')) first");
    unsupported("cannot send a numpy.ndarray of dtype " + py::str(dt).cast<std::string>() +
                ": supported dtypes are " + kSupported + "; convert it with .astype(...) first");
  }
  if (!(a.flags() & py::array::c_style))
    unsupported("cannot send a non-contiguous numpy.ndarray (shape " + shape_text(obj) + ", strides " +
                py::str(py::tuple(obj.attr("strides"))).cast<std::string>() +
                "): only C-contiguous arrays travel without a copy; call numpy.ascontiguousarray(a) first");
  Shape shape(a.shape(), a.shape() + a.ndim());
  return Tensor::borrow(a.data(), *dtype, std::move(shape));
}

// DLPack: the managed tensor owns a copy of the wcomm::Tensor, so the received buffer lives
// until torch calls the deleter (which needs no GIL: it only drops C++ references).
struct DLContext {
  Tensor tensor;
  std::vector<std::int64_t> shape;
  DLManagedTensor managed{};
};

void dl_deleter(DLManagedTensor* self) { delete static_cast<DLContext*>(self->manager_ctx); }

void dl_capsule_destructor(PyObject* capsule) {
  // Still named "dltensor": nobody consumed it, so it is ours to free.
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    managed->deleter(managed);
  }
}

DLDataType dl_dtype(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return {kDLUInt, 8, 1};
    case DType::kInt8: return {kDLInt, 8, 1};
    case DType::kInt16: return {kDLInt, 16, 1};
    case DType::kInt32: return {kDLInt, 32, 1};
    case DType::kInt64: return {kDLInt, 64, 1};
    case DType::kFloat16: return {kDLFloat, 16, 1};
    case DType::kBFloat16: return {kDLBfloat, 16, 1};
    case DType::kFloat32: return {kDLFloat, 32, 1};
    case DType::kFloat64: return {kDLFloat, 64, 1};
    case DType::kBool: return {kDLUInt, 8, 1};  // torch 1.13 has no DLPack bool: viewed as bool below
  }
  return {kDLUInt, 8, 1};
}

py::object to_torch(const Tensor& tensor, const TorchLib& torch) {
  auto* ctx = new DLContext{tensor, tensor.shape(), {}};
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = tensor.data();
  dl.device = {kDLCPU, 0};
  dl.ndim = static_cast<int>(ctx->shape.size());
  dl.dtype = dl_dtype(tensor.dtype());
  static std::int64_t no_dims = 0;
  dl.shape = ctx->shape.empty() ? &no_dims : ctx->shape.data();
  dl.strides = nullptr;  // compact row-major
  dl.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = dl_deleter;
  PyObject* capsule = PyCapsule_New(&ctx->managed, "dltensor", dl_capsule_destructor);
  if (!capsule) {
    delete ctx;
    throw py::error_already_set();
  }
  py::object cap = py::reinterpret_steal<py::object>(capsule);
  py::object out = py::reinterpret_borrow<py::object>(torch.from_dlpack)(cap);
  if (tensor.dtype() == DType::kBool) out = out.attr("view")(py::handle(torch.bool_dtype));
  return out;
}

void tensor_capsule_destructor(PyObject* capsule) {
  delete static_cast<Tensor*>(PyCapsule_GetPointer(capsule, "wcomm.Tensor"));
}

py::object to_numpy(const Tensor& tensor, NumpyLib& np) {
  py::dtype dtype;
  if (PyObject* known = np.dtypes[static_cast<int>(tensor.dtype())]) {
    dtype = py::reinterpret_borrow<py::dtype>(known);
  } else {
    // bfloat16 without ml_dtypes: a torch tensor where torch exists keeps the type; else the
    // raw bits as uint16 (documented in docs/python.md).
    if (TorchLib* torch = torch_importing()) return to_torch(tensor, *torch);
    dtype = py::dtype("uint16");
  }
  py::object base = py::reinterpret_steal<py::object>(
      PyCapsule_New(new Tensor(tensor), "wcomm.Tensor", tensor_capsule_destructor));
  std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  return py::array(dtype, shape, {}, tensor.data(), base);
}

}  // namespace

std::optional<Tensor> tensor_from_python(py::handle obj) {
  if (TorchLib* torch = torch_if_imported();
      torch && PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(torch->tensor_type)))
    return from_torch(obj, *torch);
  if (NumpyLib* np = numpy_if_imported();
      np && PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(np->ndarray_type)))
    return from_numpy(obj, *np);
  return std::nullopt;
}

py::object tensor_to_python(const Tensor& tensor, TensorMode mode) {
  if (mode != TensorMode::kNumpy) {
    if (TorchLib* torch = torch_importing()) return to_torch(tensor, *torch);
    if (mode == TensorMode::kTorch)
      raise_error(ErrorCode::kUnsupportedPayload, "a tensor arrived, and torch tensors were asked for, but torch "
                                                  "cannot be imported; install python3-torch or ask for numpy");
  }
  return to_numpy(tensor, numpy_lib());
}

}  // namespace wcomm::python
