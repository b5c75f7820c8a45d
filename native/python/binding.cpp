// Python binding (module livetail._core): a thin layer over the C++ core. It converts
// arguments (counts, table lists), keeps pools alive under the tables bound to them, and
// hands page ids to numpy in one copy. All semantics live in native/include/livetail/.
// This file holds the argument conversions every binding shares and the module itself; each
// class is bound in a bind_*.inc of its own, included below (one translation unit).
#include <nanobind/nanobind.h>
#include <nanobind/operators.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "livetail/coordinator.h"
#include "livetail/managers.h"
#include "livetail/pool.h"
#include "livetail/prefix.h"
#include "livetail/router.h"
#include "livetail/table.h"
#include "stats.h"

namespace nb = nanobind;
using namespace nb::literals;
using namespace livetail;

#ifndef LIVETAIL_VERSION
#define LIVETAIL_VERSION "0+unknown"
#endif

// --- argument wrappers ------------------------------------------------------------------
// nanobind's own int caster turns a too-large int into a TypeError and accepts bool. These
// wrappers take the raw object instead; the function body converts it with the argument's
// name, so the error type and message follow docs/decisions.md.

template <typename Tag>
struct Raw {
  PyObject* obj = nullptr;
};
struct CountTag {};   // typing.SupportsIndex (None too where the default is None)
struct StrTag {};     // str
struct TablesTag {};  // list[BlockTable] | tuple[BlockTable, ...]
struct AnyTag {};     // anything else checked by hand (typed in the stub by nb::sig)
struct FlagTag {};    // bool (a Python bool only: as_flag names the argument otherwise)
using Count = Raw<CountTag>;
using Flag = Raw<FlagTag>;
using Str = Raw<StrTag>;
using Tables = Raw<TablesTag>;
using Any = Raw<AnyTag>;

// A table holds a strong reference to the pool it is bound to, so the C++ pointer inside
// never dangles; cleared again when free unbinds it.
struct PyTable : BlockTable {
  nb::object pool_ref;
};

namespace nanobind::detail {
template <typename Tag>
constexpr auto raw_name() {
  if constexpr (std::is_same_v<Tag, CountTag>)
    return const_name("typing.SupportsIndex");
  else if constexpr (std::is_same_v<Tag, StrTag>)
    return const_name("str");
  else if constexpr (std::is_same_v<Tag, FlagTag>)
    return const_name("bool");
  else if constexpr (std::is_same_v<Tag, TablesTag>)
    return const_name("list[") + make_caster<PyTable>::Name + const_name("] | tuple[") +
           make_caster<PyTable>::Name + const_name(", ...]");
  else
    return const_name("object");
}

template <typename Tag>
struct type_caster<Raw<Tag>> {
  NB_TYPE_CASTER(Raw<Tag>, raw_name<Tag>())
  bool from_python(handle src, uint32_t, cleanup_list*) noexcept {
    value.obj = src.ptr();  // borrowed for the duration of the call
    return true;
  }
  static handle from_cpp(const Raw<Tag>& v, rv_policy, cleanup_list*) noexcept {
    return handle(v.obj).inc_ref();
  }
};
}  // namespace nanobind::detail

namespace {

// --- list, tuple and bytes access ----------------------------------------------------------
// The stable ABI (the abi3 wheel) hides the object layouts: call the API functions there;
// version-specific builds keep the macros, which save a call per item. `s` is a list or tuple.
#ifdef Py_LIMITED_API
Py_ssize_t seq_size(PyObject* s) { return PyList_Check(s) ? PyList_Size(s) : PyTuple_Size(s); }
PyObject* seq_item(PyObject* s, Py_ssize_t i) {
  return PyList_Check(s) ? PyList_GetItem(s, i) : PyTuple_GetItem(s, i);
}
const char* bytes_data(PyObject* b) { return PyBytes_AsString(b); }
Py_ssize_t bytes_size(PyObject* b) { return PyBytes_Size(b); }
#else
inline Py_ssize_t seq_size(PyObject* s) { return PySequence_Fast_GET_SIZE(s); }
inline PyObject* seq_item(PyObject* s, Py_ssize_t i) { return PySequence_Fast_GET_ITEM(s, i); }
inline const char* bytes_data(PyObject* b) { return PyBytes_AS_STRING(b); }
inline Py_ssize_t bytes_size(PyObject* b) { return PyBytes_GET_SIZE(b); }
#endif

// The short name of an object's type, for error messages (no tp_name in the stable ABI).
std::string type_name(PyObject* o) {
  nb::object n =
      nb::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(o)), "__name__"));
  if (!n.is_valid() || !PyUnicode_Check(n.ptr())) {
    PyErr_Clear();
    return "?";
  }
  const char* c = PyUnicode_AsUTF8AndSize(n.ptr(), nullptr);
  if (c == nullptr) {
    PyErr_Clear();
    return "?";
  }
  return c;
}

[[noreturn]] void type_fail(const char* name, const char* want, PyObject* got) {
  throw nb::type_error(
      (std::string(name) + " must be " + want + ", not " + type_name(got)).c_str());
}

// A bool argument: TypeError naming it for anything but True or False (nanobind's own
// caster would fail the overload with a message naming no argument).
bool as_flag(Flag f, const char* name) {
  if (!PyBool_Check(f.obj)) type_fail(name, "a bool", f.obj);
  return f.obj == Py_True;
}

void import_numpy();
PyObject* np_bool = nullptr;  // numpy.bool_, once numpy is loaded

// numpy's bool scalar is not a count either, but numpy < 2.3 gives it __index__.
bool is_numpy_bool(PyObject* o) {
  if (np_bool == nullptr) {
    if (PyDict_GetItemString(PyImport_GetModuleDict(), "numpy") == nullptr)
      return false;  // numpy not loaded: no numpy bool can exist
    import_numpy();
  }
  return PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(np_bool));
}

// A count: an int or an object with __index__ (numpy integers), never bool, never negative.
int64_t as_count(PyObject* o, const char* name) {
  if (PyBool_Check(o)) type_fail(name, "an int", o);
  int overflow = 0;
  long long v;
  if (PyLong_Check(o)) {
    v = PyLong_AsLongLongAndOverflow(o, &overflow);
  } else {
    if (is_numpy_bool(o)) type_fail(name, "an int", o);
    PyObject* i = PyNumber_Index(o);
    if (i == nullptr) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw nb::python_error();
      PyErr_Clear();
      type_fail(name, "an int", o);
    }
    v = PyLong_AsLongLongAndOverflow(i, &overflow);
    Py_DECREF(i);
  }
  if (overflow > 0) throw std::invalid_argument(std::string(name) + " is too large");
  if (overflow < 0 || v < 0)
    throw std::invalid_argument(std::string(name) + " must be >= 0" +
                                (overflow ? std::string() : ", got " + std::to_string(v)));
  return v;
}

// A size that must be in [lo, 2**31 - 1] with lo >= 1 (num_blocks, block_size,
// sliding_window): converted as a count, but a negative value is refused with that range,
// as the core refuses 0 (never "must be >= 0", which would suggest 0 is accepted).
int64_t as_size(PyObject* o, const char* name, int64_t lo) {
  try {
    return as_count(o, name);
  } catch (const std::invalid_argument&) {
    nb::object i = nb::steal(PyNumber_Index(o));  // as_count checked the type
    if (!i.is_valid()) throw nb::python_error();
    throw std::invalid_argument(std::string(name) + " must be in [" + std::to_string(lo) +
                                ", 2**31 - 1], got " + nb::str(i).c_str());
  }
}

// The default of an argument that has none in Python, so that leaving it out is a
// TypeError naming it (as Python's own "missing 1 required positional argument") instead of
// nanobind's "incompatible function arguments". One object, never released.
PyObject* missing_arg() {
  static PyObject* const missing =
      PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type));
  return missing;
}

// --- Python-side objects ------------------------------------------------------------------

void keep_pool(PyTable& t, PyObject* pool) {
  if (t.is_bound()) {
    if (!t.pool_ref.is_valid()) t.pool_ref = nb::borrow(pool);
  } else if (t.pool_ref.is_valid()) {
    t.pool_ref.reset();
  }
}

struct PyCoordinator : Coordinator {
  PyCoordinator(std::vector<GroupSpec> specs, nb::handle pool, HostPool* host,
                int64_t alignment = 0)
      : Coordinator(std::move(specs), *nb::inst_ptr<BlockPool>(pool), host, alignment),
        pool_ref(nb::borrow(pool)),
        host_ref(host ? nb::find(host) : nb::none()) {}
  nb::object pool_ref;
  nb::object host_ref;  // the HostPool, or None
  nb::list managers_py;  // the managers as Python objects of their own class, built once
};

PyObject* table_type = nullptr;

PyTable* as_table(PyObject* o, const char* name) {
  if (Py_TYPE(o) != reinterpret_cast<PyTypeObject*>(table_type) || !nb::inst_ready(o))
    type_fail(name, "a BlockTable", o);
  return nb::inst_ptr<PyTable>(o);
}

// The tables of a list or tuple, without copying the list for the common small case.
class TableList {
 public:
  TableList(PyObject* seq, const char* name) {
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) type_fail(name, "a list or tuple", seq);
    const Py_ssize_t n = seq_size(seq);
    if (n > kSmall) big_.resize(static_cast<size_t>(n));
    BlockTable** out = n > kSmall ? big_.data() : small_;
    for (Py_ssize_t i = 0; i < n; ++i) out[i] = as_table(seq_item(seq, i), name);
    span_ = {out, static_cast<size_t>(n)};
  }
  std::span<BlockTable* const> span() const { return span_; }
  void keep_pools(PyObject* pool) const {
    for (BlockTable* t : span_) ::keep_pool(*static_cast<PyTable*>(t), pool);
  }

 private:
  static constexpr Py_ssize_t kSmall = 8;
  BlockTable* small_[kSmall];
  std::vector<BlockTable*> big_;
  std::span<BlockTable* const> span_;
};

// --- numpy output -------------------------------------------------------------------------
// numpy.empty from C, then one memcpy into its buffer: no numpy headers at build time.

// Strong references held for the life of the process (never released: no decref after
// the interpreter is gone).
PyObject* np_empty = nullptr;
PyObject* np_int32 = nullptr;

struct Int32Array {
  nb::object array;
  int32_t* data;
};

// numpy is imported on first use, so that importing livetail._core (as the stub generator
// does at build time) needs no numpy.
void import_numpy() {
  nb::module_ np = nb::module_::import_("numpy");
  np_empty = nb::object(np.attr("empty")).release().ptr();
  np_int32 = nb::object(np.attr("dtype")("int32")).release().ptr();
  np_bool = nb::object(np.attr("bool_")).release().ptr();
}

Int32Array new_int32_array(size_t rows, size_t cols, bool two_d) {
  if (np_empty == nullptr) [[unlikely]]
    import_numpy();
  nb::object shape = two_d ? nb::object(nb::make_tuple(rows, cols)) : nb::object(nb::int_(cols));
  PyObject* args[] = {shape.ptr(), np_int32};
  nb::object arr = nb::steal(PyObject_Vectorcall(np_empty, args, 2, nullptr));
  if (!arr.is_valid()) throw nb::python_error();
  Py_buffer view;
  if (PyObject_GetBuffer(arr.ptr(), &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0)
    throw nb::python_error();
  auto* data = static_cast<int32_t*>(view.buf);
  PyBuffer_Release(&view);  // arr owns the memory and outlives this call's use of it
  return {std::move(arr), data};
}

nb::object int32_vector(std::span<const int32_t> v) {
  Int32Array a = new_int32_array(1, v.size(), false);
  if (!v.empty()) std::memcpy(a.data, v.data(), v.size_bytes());
  return std::move(a.array);
}

// Integers: a 1-D buffer of integers (8 to 64 bits) read in place, else a sequence of
// counts; errors name the argument.
std::vector<int64_t> as_int_vector(PyObject* o, const char* name) {
  std::vector<int64_t> out;
  if (PyObject_CheckBuffer(o) && !PyBytes_Check(o) && !PyByteArray_Check(o)) {
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_RECORDS_RO) != 0) throw nb::python_error();
    std::string fmt = view.format ? view.format : "B";
    if (fmt.size() == 2 && (fmt[0] == '@' || fmt[0] == '=' || fmt[0] == '<')) fmt.erase(0, 1);
    const char code = fmt.size() == 1 ? fmt[0] : '?';
    // Every integer dtype: int8/16/32/64 (b h i l q) and uint8/16/32/64 (B H I L Q).
    const bool is_signed = code == 'b' || code == 'h' || code == 'i' || code == 'l' || code == 'q';
    const bool is_unsigned =
        code == 'B' || code == 'H' || code == 'I' || code == 'L' || code == 'Q';
    const Py_ssize_t size = view.itemsize;
    if (view.ndim != 1 || !(is_signed || is_unsigned) ||
        (size != 1 && size != 2 && size != 4 && size != 8)) {
      PyBuffer_Release(&view);
      type_fail(name, "a sequence of ints or a 1-D integer array", o);
    }
    const auto n = static_cast<size_t>(view.shape[0]);
    out.resize(n);
    const char* p = static_cast<const char*>(view.buf);
    bool bad = false;
    for (size_t i = 0; i < n; ++i, p += view.strides[0]) {
      int64_t v = 0;
      if (size == 1) {
        int8_t x;
        std::memcpy(&x, p, 1);
        v = is_signed ? x : static_cast<int64_t>(static_cast<uint8_t>(x));
      } else if (size == 2) {
        int16_t x;
        std::memcpy(&x, p, 2);
        v = is_signed ? x : static_cast<int64_t>(static_cast<uint16_t>(x));
      } else if (size == 4) {
        int32_t x;
        std::memcpy(&x, p, 4);
        v = is_signed ? x : static_cast<int64_t>(static_cast<uint32_t>(x));
      } else {
        std::memcpy(&v, p, 8);
        bad |= is_unsigned && v < 0;  // above 2**63 - 1
      }
      out[i] = v;
    }
    PyBuffer_Release(&view);
    if (bad) throw std::invalid_argument(std::string(name) + " holds a value that is too large");
    for (size_t i = 0; i < n; ++i)
      if (out[i] < 0)
        throw std::invalid_argument(std::string(name) + "[" + std::to_string(i) + "] must be >= 0");
  } else {
    nb::object seq =
        nb::steal(PySequence_Fast(o, (std::string(name) + " must be a sequence").c_str()));
    if (!seq.is_valid()) throw nb::python_error();
    const Py_ssize_t n = seq_size(seq.ptr());
    out.resize(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i)
      out[static_cast<size_t>(i)] = as_count(seq_item(seq.ptr(), i), name);
  }
  return out;
}

// Frontiers: one per request.
std::vector<int64_t> as_frontiers(PyObject* o, size_t expected) {
  const char* name = "num_computed_tokens";
  std::vector<int64_t> out = as_int_vector(o, name);
  if (out.size() != expected)
    throw std::invalid_argument(std::string(name) + " must hold one frontier per request (" +
                                std::to_string(expected) + "), got " + std::to_string(out.size()));
  return out;
}

// --- reprs ------------------------------------------------------------------------------------

std::string spec_repr(const GroupSpec& s) {
  std::string r =
      std::string("GroupSpec('") + kind_name(s.kind) + "', " + std::to_string(s.block_size);
  if (s.sliding_window) r += ", sliding_window=" + std::to_string(*s.sliding_window);
  if (s.live_tail_alloc) r += ", live_tail_alloc=True";
  if (s.attention_chunk_size) r += ", attention_chunk_size=" + std::to_string(*s.attention_chunk_size);
  if (s.checkpoints) r += ", checkpoints=True";
  return r + ")";
}

std::string manager_repr(const Manager& m) {
  const std::string b = "block_size=" + std::to_string(m.block_size());
  switch (m.kind()) {
    case GroupKind::full:
      return "FullAttentionManager(" + b + ")";
    case GroupKind::state:
      return "StateManager(" + b + (m.live_tail_state() ? ", live_tail=True" : "") +
             (m.checkpoints() ? ", checkpoints=True)" : ")");
    case GroupKind::chunked:
      return "ChunkedLocalAttentionManager(" + b +
             ", attention_chunk_size=" + std::to_string(m.attention_chunk_size()) + ")";
    case GroupKind::sliding:
      break;
  }
  return "SlidingWindowManager(" + b + ", sliding_window=" + std::to_string(m.sliding_window()) +
         ", live_alloc_alignment=" + std::to_string(m.live_alloc_alignment()) + ")";
}

std::string pool_repr(const BlockPool& p) {
  return "BlockPool(num_blocks=" + std::to_string(p.num_blocks()) +
         ", num_free=" + std::to_string(p.num_free()) +
         ", num_pinned=" + std::to_string(p.num_pinned()) + ")";
}

// A pool argument: the Python object itself, so that a table can hold it.
using PoolArg = nb::handle_t<BlockPool>;

}  // namespace

#include "bind_pool.inc"         // BlockPool (and bind_names, which HostPool shares)
#include "bind_plan.inc"         // Coordinator.plan_step / apply_step (semantics section 9)
#include "bind_host.inc"         // HostPool, offload and load plans (semantics section 10)
#include "bind_prefix.inc"       // keys, tokens, PrefixMatch, page_keys (semantics section 8)
#include "bind_table.inc"        // BlockTable, page_ids_batch
#include "bind_managers.inc"     // Manager and its three kinds, GroupSpec
#include "bind_coordinator.inc"  // Coordinator
#include "bind_router.inc"       // livetail.router's table probes and boundary search
#ifdef LIVETAIL_SANITIZE
namespace livetail {
void bind_sanitizer_control(nb::module_& m);  // test-only: sanitize_control.cpp
}
#endif

// --- module ----------------------------------------------------------------------------------

NB_MODULE(_core, m) {
  m.doc() = "livetail native core: paged KV-cache block manager with live-tail allocation.";
  m.attr("__version__") = LIVETAIL_VERSION;

  // Registration order is the order of the module's names (and of its stubs).
  bind_pool(m);
  bind_table(m);
  bind_managers(m);
  bind_prefix_match(m);
  bind_coordinator(m);
  bind_prefix_functions(m);
  bind_table_batch(m);
  bind_plan(m);
  bind_host(m);
  bind_router(m);

#ifdef LIVETAIL_SANITIZE
  livetail::bind_sanitizer_control(m);
#endif
}
