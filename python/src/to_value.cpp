// Python -> Value (see to_value.h). Exact builtin types first (the common case, one pointer
// compare each), then registered types, tensors, subclasses of builtins, and pickle last.
#include "to_value.h"

#include <string>
#include <utility>

#include "errors_bridge.h"
#include "tensor_bridge.h"

namespace wcomm::python {
namespace {

std::string type_name(py::handle obj) {
  py::handle type = py::type::handle_of(obj);
  std::string module = py::str(type.attr("__module__")).cast<std::string>();
  std::string name = py::str(type.attr("__qualname__")).cast<std::string>();
  return module == "builtins" ? name : module + "." + name;
}

Value int_value(py::handle obj) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
  if (overflow == 0) {
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return static_cast<std::int64_t>(v);
  }
  if (overflow > 0) {
    unsigned long long u = PyLong_AsUnsignedLongLong(obj.ptr());
    if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) return static_cast<std::uint64_t>(u);
    PyErr_Clear();
  }
  raise_error(ErrorCode::kUnsupportedPayload,
              "int " + py::str(obj).cast<std::string>() + " is out of range: ints travel as -2**63 .. 2**64-1");
}

Value str_value(py::handle obj) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
  if (!data) {
    PyErr_Clear();
    raise_error(ErrorCode::kSerialization, "a str that is not valid Unicode (a lone surrogate) cannot be sent");
  }
  return std::string(data, static_cast<std::size_t>(size));
}

// bytes, bytearray and C-contiguous buffers travel as Bytes over the object's own memory.
Value bytes_value(py::handle obj, EncodeContext& ctx) {
  const void* data = nullptr;
  std::size_t size = 0;
  if (PyBytes_Check(obj.ptr())) {
    data = PyBytes_AS_STRING(obj.ptr());
    size = static_cast<std::size_t>(PyBytes_GET_SIZE(obj.ptr()));
  } else if (PyByteArray_Check(obj.ptr())) {
    data = PyByteArray_AS_STRING(obj.ptr());
    size = static_cast<std::size_t>(PyByteArray_GET_SIZE(obj.ptr()));
  } else {
    Py_buffer view;
    if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      raise_error(ErrorCode::kUnsupportedPayload,
                  "cannot send a non-contiguous or released memoryview: call bytes(view) on it first");
    }
    data = view.buf;
    size = static_cast<std::size_t>(view.len);
    // The memoryview keeps its own export alive for as long as it lives (keepalive below).
    PyBuffer_Release(&view);
  }
  ctx.keepalive.append(obj);
  return Bytes(Buffer::borrow(data, size));
}

Value registered_value(py::handle obj, py::handle entry, EncodeContext& ctx, std::size_t depth) {
  auto e = py::reinterpret_borrow<py::tuple>(entry);
  std::string kind = e[0].cast<std::string>();
  std::string type_id = e[1].cast<std::string>();
  auto version = e[2].cast<std::uint32_t>();
  if (kind == "record") {
    Record record{type_id, version, {}};
    for (py::handle name : py::reinterpret_borrow<py::tuple>(e[3])) {
      py::object field = obj.attr(name);
      // Field values may be computed (properties): keep them alive with the send.
      ctx.keepalive.append(field);
      record.fields.emplace_back(name.cast<std::string>(), to_value(field, ctx, depth + 1));
    }
    return record;
  }
  py::object encoded = e[3](obj);
  ctx.keepalive.append(encoded);
  return Custom{type_id, version, std::make_shared<const Value>(to_value(encoded, ctx, depth + 1))};
}

Value pickled_value(py::handle obj, EncodeContext& ctx) {
  if (!ctx.allow_pickle)
    raise_error(ErrorCode::kUnsupportedPayload,
                "cannot send an object of type " + type_name(obj) +
                    ": register it with comm.register_dataclass(...) or comm.register_codec(...), or pickle it "
                    "with CommConfig(allow_unsafe_pickle=True) on both nodes (trusted peers only)");
  static PyObject* dumps = py::object(py::module_::import("pickle").attr("dumps")).release().ptr();
  py::object blob = py::reinterpret_borrow<py::object>(dumps)(obj, 5);
  ctx.keepalive.append(blob);
  return Pickled{Buffer::borrow(PyBytes_AS_STRING(blob.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(blob.ptr())))};
}

}  // namespace

Value to_value(py::handle obj, EncodeContext& ctx, std::size_t depth) {
  if (depth > ctx.max_depth)
    raise_error(ErrorCode::kSerialization, "containers nested deeper than max_container_depth (" +
                                               std::to_string(ctx.max_depth) + ") (a reference cycle?)");
  PyObject* o = obj.ptr();
  PyTypeObject* type = Py_TYPE(o);
  if (o == Py_None) return None{};
  if (type == &PyBool_Type) return o == Py_True;
  if (type == &PyLong_Type) return int_value(obj);
  if (type == &PyFloat_Type) return PyFloat_AS_DOUBLE(o);
  if (type == &PyUnicode_Type) return str_value(obj);
  if (type == &PyBytes_Type || type == &PyByteArray_Type || type == &PyMemoryView_Type) return bytes_value(obj, ctx);
  if (type == &PyList_Type || type == &PyTuple_Type) {
    const bool is_list = type == &PyList_Type;
    std::vector<Value> items;
    Py_ssize_t n = is_list ? PyList_GET_SIZE(o) : PyTuple_GET_SIZE(o);
    items.reserve(static_cast<std::size_t>(n));
    // Indexing (not iteration) on purpose: a list mutated by an encoder callback stays safe.
    for (Py_ssize_t i = 0; i < (is_list ? PyList_GET_SIZE(o) : n); ++i) {
      py::object item = py::reinterpret_borrow<py::object>(is_list ? PyList_GET_ITEM(o, i) : PyTuple_GET_ITEM(o, i));
      items.push_back(to_value(item, ctx, depth + 1));
    }
    if (is_list) return List(std::move(items));
    return Tuple(std::move(items));
  }
  if (type == &PyDict_Type) {
    std::vector<std::pair<Value, Value>> items;
    items.reserve(static_cast<std::size_t>(PyDict_GET_SIZE(o)));
    // A snapshot of the items: callbacks (encoders) may not change the dict under us.
    py::list pairs = py::reinterpret_steal<py::list>(PyDict_Items(o));
    for (py::handle pair : pairs) {
      auto kv = py::reinterpret_borrow<py::tuple>(pair);
      Value key = to_value(kv[0], ctx, depth + 1);
      items.emplace_back(std::move(key), to_value(kv[1], ctx, depth + 1));
    }
    return Dict(std::move(items));
  }
  if (PyObject* entry = PyDict_GetItem(ctx.encoders.ptr(), reinterpret_cast<PyObject*>(type)))
    return registered_value(obj, entry, ctx, depth);
  if (auto tensor = tensor_from_python(obj)) {
    ctx.keepalive.append(obj);
    return std::move(*tensor);
  }
  // Subclasses of builtins (IntEnum, OrderedDict, namedtuple, ...) travel as their base type.
  if (PyLong_Check(o)) return int_value(obj);
  if (PyFloat_Check(o)) return PyFloat_AsDouble(o);
  if (PyUnicode_Check(o)) return str_value(obj);
  if (PyBytes_Check(o) || PyByteArray_Check(o)) return bytes_value(obj, ctx);
  if (PyList_Check(o) || PyTuple_Check(o) || PyDict_Check(o)) {
    // An exact copy of the container (never the same object: that would recurse forever).
    PyObject* base = PyDict_Check(o)   ? PyObject_CallOneArg(reinterpret_cast<PyObject*>(&PyDict_Type), o)
                     : PyList_Check(o) ? PySequence_List(o)
                                       : PySequence_Tuple(o);
    if (!base) throw py::error_already_set();
    auto owned = py::reinterpret_steal<py::object>(base);
    ctx.keepalive.append(owned);
    return to_value(owned, ctx, depth);
  }
  return pickled_value(obj, ctx);
}

}  // namespace wcomm::python
