// Value -> Python (see from_value.h).
#include "from_value.h"

#include <string>

#include "errors_bridge.h"

namespace wcomm::python {
namespace {

py::object steal(PyObject* o) {
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

// The decoder entry for a type_id, checked against the version that arrived.
py::tuple decoder_for(DecodeContext& ctx, const std::string& type_id, std::uint32_t version, const char* kind) {
  PyObject* entry = PyDict_GetItemString(ctx.decoders.ptr(), type_id.c_str());
  if (!entry)
    raise_error(ErrorCode::kUnknownCodec, std::string(kind) + " type_id '" + type_id + "' has no Python class here");
  auto e = py::reinterpret_borrow<py::tuple>(entry);
  if (e[1].cast<std::uint32_t>() != version)
    raise_error(ErrorCode::kUnknownCodec, std::string(kind) + " type_id '" + type_id + "' arrived as version " +
                                              std::to_string(version) + " but version " +
                                              std::to_string(e[1].cast<std::uint32_t>()) + " is registered");
  return e;
}

// Calls a user's builder / decoder; its exception becomes a SerializationError that says
// which type failed, chained to the original.
py::object call_user(py::handle fn, py::handle arg, const std::string& what) {
  PyObject* out = PyObject_CallOneArg(fn.ptr(), arg.ptr());
  if (out) return py::reinterpret_steal<py::object>(out);
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  if (trace) PyException_SetTraceback(value, trace);
  py::object cause = py::reinterpret_steal<py::object>(value);
  Py_XDECREF(type);
  Py_XDECREF(trace);
  py::object error = error_class(ErrorCode::kSerialization)(what + " failed: " + py::repr(cause).cast<std::string>());
  PyException_SetCause(error.ptr(), cause.release().ptr());
  PyErr_SetObject(error_class(ErrorCode::kSerialization).ptr(), error.ptr());
  throw py::error_already_set();
}

}  // namespace

py::object to_python(const Value& value, DecodeContext& ctx) {
  return std::visit(
      [&](const auto& v) -> py::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, None>) {
          return py::none();
        } else if constexpr (std::is_same_v<T, bool>) {
          return py::bool_(v);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          return steal(PyLong_FromLongLong(v));
        } else if constexpr (std::is_same_v<T, std::uint64_t>) {
          return steal(PyLong_FromUnsignedLongLong(v));
        } else if constexpr (std::is_same_v<T, double>) {
          return steal(PyFloat_FromDouble(v));
        } else if constexpr (std::is_same_v<T, std::string>) {
          return steal(PyUnicode_DecodeUTF8(v.data(), static_cast<Py_ssize_t>(v.size()), "strict"));
        } else if constexpr (std::is_same_v<T, Bytes>) {
          ctx.bytes_copied += v.size();
          return steal(PyBytes_FromStringAndSize(reinterpret_cast<const char*>(v.buffer.data()),
                                                 static_cast<Py_ssize_t>(v.size())));
        } else if constexpr (std::is_same_v<T, Tensor>) {
          return tensor_to_python(v, ctx.mode);
        } else if constexpr (std::is_same_v<T, List>) {
          py::list out(v.items.size());
          for (std::size_t i = 0; i < v.items.size(); ++i)
            PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), to_python(v.items[i], ctx).release().ptr());
          return out;
        } else if constexpr (std::is_same_v<T, Tuple>) {
          py::tuple out(v.items.size());
          for (std::size_t i = 0; i < v.items.size(); ++i)
            PyTuple_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), to_python(v.items[i], ctx).release().ptr());
          return out;
        } else if constexpr (std::is_same_v<T, Dict>) {
          py::dict out;
          for (const auto& [k, item] : v.items) {
            py::object key = to_python(k, ctx);
            if (PyObject_Hash(key.ptr()) == -1) {
              PyErr_Clear();
              raise_error(ErrorCode::kSerialization,
                          "a dict key of type " + py::type::handle_of(key).attr("__name__").cast<std::string>() +
                              " arrived, which is not hashable in Python");
            }
            if (PyDict_SetItem(out.ptr(), key.ptr(), to_python(item, ctx).ptr()) != 0) throw py::error_already_set();
          }
          return out;
        } else if constexpr (std::is_same_v<T, Record>) {
          py::tuple entry = decoder_for(ctx, v.type_id, v.version, "dataclass");
          py::dict fields;
          for (const auto& [name, item] : v.fields) fields[py::str(name)] = to_python(item, ctx);
          return call_user(entry[2], fields, "building dataclass '" + v.type_id + "'");
        } else if constexpr (std::is_same_v<T, Custom>) {
          py::tuple entry = decoder_for(ctx, v.type_id, v.version, "custom codec");
          py::object encoded = v.encoded ? to_python(*v.encoded, ctx) : py::none();
          return call_user(entry[2], encoded, "the decoder of custom codec '" + v.type_id + "'");
        } else if constexpr (std::is_same_v<T, Pickled>) {
          static PyObject* loads = py::object(py::module_::import("pickle").attr("loads")).release().ptr();
          // pickle reads straight from the received buffer (alive for this call).
          py::object view = steal(PyMemoryView_FromMemory(reinterpret_cast<char*>(v.data.data()),
                                                          static_cast<Py_ssize_t>(v.data.size()), PyBUF_READ));
          return call_user(loads, view, "unpickling");
        }
      },
      value.variant());
}

}  // namespace wcomm::python
