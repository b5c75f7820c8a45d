// Python binding (module livetail._core): a thin layer over the C++ core. It converts
// arguments (counts, table lists), keeps pools alive under the tables bound to them, and
// hands page ids to numpy in one copy. All semantics live in native/include/livetail/.
#include <nanobind/nanobind.h>
#include <nanobind/operators.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

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
using Count = Raw<CountTag>;
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

// --- Python-side objects ------------------------------------------------------------------

void keep_pool(PyTable& t, PyObject* pool) {
  if (t.is_bound()) {
    if (!t.pool_ref.is_valid()) t.pool_ref = nb::borrow(pool);
  } else if (t.pool_ref.is_valid()) {
    t.pool_ref.reset();
  }
}

struct PyCoordinator : Coordinator {
  PyCoordinator(std::vector<GroupSpec> specs, nb::handle pool, HostPool* host)
      : Coordinator(std::move(specs), *nb::inst_ptr<BlockPool>(pool), host),
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

// Frontiers: a 1-D buffer of 32/64-bit integers read in place, else a sequence of counts.
std::vector<int64_t> as_frontiers(PyObject* o, size_t expected) {
  std::vector<int64_t> out;
  const char* name = "num_computed_tokens";
  if (PyObject_CheckBuffer(o) && !PyBytes_Check(o) && !PyByteArray_Check(o)) {
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_RECORDS_RO) != 0) throw nb::python_error();
    std::string fmt = view.format ? view.format : "B";
    if (fmt.size() == 2 && (fmt[0] == '@' || fmt[0] == '=' || fmt[0] == '<')) fmt.erase(0, 1);
    const char code = fmt.size() == 1 ? fmt[0] : '?';
    const bool is_signed = code == 'i' || code == 'l' || code == 'q';
    const bool is_unsigned = code == 'I' || code == 'L' || code == 'Q';
    if (view.ndim != 1 || !(is_signed || is_unsigned) ||
        (view.itemsize != 4 && view.itemsize != 8)) {
      PyBuffer_Release(&view);
      type_fail(name, "a sequence of ints or a 1-D integer array", o);
    }
    const auto n = static_cast<size_t>(view.shape[0]);
    out.resize(n);
    const char* p = static_cast<const char*>(view.buf);
    bool bad = false;
    for (size_t i = 0; i < n; ++i, p += view.strides[0]) {
      int64_t v;
      if (view.itemsize == 4) {
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
    nb::object seq = nb::steal(PySequence_Fast(o, "num_computed_tokens must be a sequence"));
    if (!seq.is_valid()) throw nb::python_error();
    const Py_ssize_t n = seq_size(seq.ptr());
    out.resize(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i)
      out[static_cast<size_t>(i)] = as_count(seq_item(seq.ptr(), i), name);
  }
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
  return r + ")";
}

std::string manager_repr(const Manager& m) {
  const std::string b = "block_size=" + std::to_string(m.block_size());
  switch (m.kind()) {
    case GroupKind::full:
      return "FullAttentionManager(" + b + ")";
    case GroupKind::state:
      return "StateManager(" + b + ")";
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

// --- docstrings -------------------------------------------------------------------------------

constexpr const char* kDecodeDoc = R"(One decode step for a batch of requests.

``requests[r]`` is request r's list of tables (one per group, as for ``acquire``) and
``num_computed_tokens[r]`` the frontier its reclaim uses (a sequence of ints or a 1-D
array of 32- or 64-bit integers). The call equals this loop of single calls::

    stepped = reclaimed = 0
    for tables, f in zip(requests, num_computed_tokens):
        if not self.acquire(tables, 1):
            break                       # this request and all later ones: untouched
        reclaimed += self.reclaim_expired(tables, f)
        stepped += 1
    return stepped, reclaimed

Returns ``(stepped, reclaimed)``: requests ``[0, stepped)`` acquired one token and
reclaimed; if ``stepped < len(requests)``, request ``stepped`` found the pool short.
Every argument is checked before anything changes (each frontier against the extent its
acquire creates; every table in the batch must be a distinct object), so a call that
raises changes nothing.)";

// --- prefix caching arguments --------------------------------------------------------------

// keys: a list or tuple of bytes objects of length 32 (anything else is a ValueError, as in
// the spec), copied into a per-thread buffer that the next conversion reuses.
std::span<const Key> as_keys(PyObject* o) {
  thread_local std::vector<Key> buf;
  if (!PyList_Check(o) && !PyTuple_Check(o))
    throw std::invalid_argument("keys must be a list or tuple of 32-byte bytes, not " +
                                type_name(o));
  const Py_ssize_t n = seq_size(o);
  buf.resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* k = seq_item(o, i);
    if (!PyBytes_Check(k) || bytes_size(k) != static_cast<Py_ssize_t>(KEY_BYTES))
      throw std::invalid_argument("keys[" + std::to_string(i) +
                                  "] must be a bytes object of length 32");
    std::memcpy(buf[static_cast<size_t>(i)].data(), bytes_data(k), KEY_BYTES);
  }
  return {buf.data(), buf.size()};
}

constexpr uint64_t kTokenMax = 0xFFFFFFFFull;

// Token ids for page_keys: a 1-D integer buffer (numpy arrays of any integer dtype and byte
// order) read in place, else any iterable of ints / __index__ objects. As in the spec, every
// element is converted (TypeError) before any is range-checked (ValueError).
class Tokens {
 public:
  explicit Tokens(PyObject* o) {
    if (PyObject_CheckBuffer(o) && from_buffer(o)) return;
    nb::object seq = nb::steal(PySequence_Fast(o, "tokens must be an iterable of ints"));
    if (!seq.is_valid()) throw nb::python_error();
    const Py_ssize_t n = seq_size(seq.ptr());
    own_.resize(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* t = seq_item(seq.ptr(), i);
      int overflow = 0;
      long long v;
      if (PyLong_Check(t)) {  // bool included, as operator.index accepts it
        v = PyLong_AsLongLongAndOverflow(t, &overflow);
      } else {
        // __index__ is Python code: it may change the list we are reading.
        nb::object idx = nb::steal(PyNumber_Index(nb::borrow(t).ptr()));
        if (!idx.is_valid()) throw nb::python_error();  // TypeError, as operator.index
        if (seq_size(seq.ptr()) != n) throw nb::value_error("tokens changed size while being read");
        v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
      }
      if (overflow != 0 || v < 0 || static_cast<uint64_t>(v) > kTokenMax) {
        if (!bad_)
          bad_ = overflow < 0   ? "a negative value beyond int64"
                 : overflow > 0 ? "a value beyond int64"
                                : std::to_string(v);
        continue;
      }
      own_[static_cast<size_t>(i)] = static_cast<uint32_t>(v);
    }
    check_range();
    span_ = own_;
  }
  std::span<const uint32_t> span() const { return span_; }

 private:
  // False (nothing read) for buffers that are not numbers, e.g. numpy object arrays.
  bool from_buffer(PyObject* o) {
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_RECORDS_RO) != 0) {
      PyErr_Clear();
      return false;
    }
    struct Release {
      Py_buffer* v;
      ~Release() { PyBuffer_Release(v); }
    } release{&view};
    std::string_view fmt = view.format ? view.format : "B";
    char order = '@';
    if (!fmt.empty() && std::strchr("@=<>!", fmt[0]) != nullptr) {
      order = fmt[0];
      fmt.remove_prefix(1);
    }
    if (fmt == "O") return false;  // Python objects: convert them one by one
    const bool is_signed = fmt.size() == 1 && std::strchr("bhilqn", fmt[0]) != nullptr;
    const bool is_unsigned = fmt.size() == 1 && std::strchr("BHILQN", fmt[0]) != nullptr;
    const auto size = static_cast<size_t>(view.itemsize);
    if (view.ndim != 1 || !(is_signed || is_unsigned) ||
        (size != 1 && size != 2 && size != 4 && size != 8))
      type_fail("tokens", "a sequence of ints or a 1-D integer array", o);
    const bool little = std::endian::native == std::endian::little;
    const bool swap = (order == '<' && !little) || ((order == '>' || order == '!') && little);
    const auto n = static_cast<size_t>(view.shape[0]);
    const Py_ssize_t stride = view.strides[0];
    const char* p = static_cast<const char*>(view.buf);
    if (is_unsigned && size == 4 && !swap && stride == 4) {  // uint32 in place: no conversion
      own_.assign(reinterpret_cast<const uint32_t*>(p), reinterpret_cast<const uint32_t*>(p) + n);
      span_ = own_;
      return true;
    }
    own_.resize(n);
    for (size_t i = 0; i < n; ++i, p += stride) {
      uint64_t u = 0;
      std::memcpy(&u, p, size);  // little-endian host: the low bytes; fixed below otherwise
      if (!little) u >>= 64 - 8 * size;
      if (swap) u = __builtin_bswap64(u) >> (64 - 8 * size);
      if (is_signed && size < 8 && (u >> (8 * size - 1)) != 0) u |= ~uint64_t{0} << (8 * size);
      const bool negative = is_signed && static_cast<int64_t>(u) < 0;
      if (negative || u > kTokenMax) {
        if (!bad_) bad_ = negative ? std::to_string(static_cast<int64_t>(u)) : std::to_string(u);
        continue;
      }
      own_[i] = static_cast<uint32_t>(u);
    }
    check_range();
    span_ = own_;
    return true;
  }
  void check_range() const {
    if (bad_) throw std::invalid_argument("token ids must be in [0, 4294967295], got " + *bad_);
  }

  std::vector<uint32_t> own_;
  std::span<const uint32_t> span_;
  std::optional<std::string> bad_;
};

nb::list key_list(const std::vector<Key>& keys) {
  nb::list out = nb::steal<nb::list>(PyList_New(static_cast<Py_ssize_t>(keys.size())));
  if (!out.is_valid()) throw nb::python_error();
  for (size_t i = 0; i < keys.size(); ++i) {
    PyObject* b = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(keys[i].data()),
                                            static_cast<Py_ssize_t>(KEY_BYTES));
    if (b == nullptr) throw nb::python_error();
    PyList_SetItem(out.ptr(), static_cast<Py_ssize_t>(i), b);  // steals b
  }
  return out;
}

constexpr const char* kPageKeysDoc = R"(One 32-byte key per full base page of a prompt.

``key[j] = SHA-256(key[j-1] || tokens of base page j as little-endian uint32 || salt)``,
where ``key[-1]`` is empty: each key depends on every token up to its page's end and on the
salt (adapter name, tenant). A partial last page gets no key. ``tokens`` is a sequence of
ints or a 1-D integer numpy array (read in place); token ids outside ``0 .. 2**32 - 1``
are a ValueError. ``base_block_size`` is the coordinator's ``base_block_size``.)";

constexpr const char* kCacheDoc = R"(Name the pages of a prompt's computed prefix.

Every real slot ``j`` of every group with ``(j+1)*B <= num_tokens`` and ``(j+1)*k <=
len(keys)`` (``k = B / base_block_size``) that has no name yet gets the name ``(group,
keys[(j+1)*k - 1])``; holes are skipped and a page named once keeps its name. State groups
name only the slot that ends exactly at ``num_tokens``. Returns the pages newly named.
Idempotent; costs the slots newly covered since the table's last call. Call it after a
chunk is computed and before reclaiming for that chunk (a page reclaimed unnamed is gone
for matching). ``num_tokens`` above a table's extent is a ValueError.)";

constexpr const char* kMatchDoc =
    R"(The greatest cached prefix every group can resume from (read-only).

``num_tokens`` is the greatest multiple of ``lcm_block_size``, at most ``len(keys) *
base_block_size``, such that every full group has named pages for all its slots below it
and every sliding or state group for the resume pages right behind it (0 if none).
``pages[g]`` holds group g's page per slot below ``num_tokens`` (0 = hole). Each name's
earliest registered page in use is taken, else its earliest one. Named pages stay matchable
in the free queue until an allocation evicts them; claim every hit of a step before
acquiring anything, or match again.)";

constexpr const char* kClaimDoc =
    R"(Share a match's pages into fresh tables (one reference per slot).

``tables`` must be fresh (empty and unbound). Each table gets ``num_tokens / B`` slots
(the match's pages, holes as holes), tail room 0, its reclaim floor below its resume pages,
and is bound to the pool; a free matched page leaves the free queue. A match of 0 tokens
changes nothing. A match of another coordinator, or one with a page that no longer carries
the name it was matched under (evicted since), is a ValueError, and nothing changes.

Host tier (semantics section 10): every slot the match serves from the host gets a fresh
device page (counted in blocks_consumed_by_claim; all or nothing: a ValueError, nothing
changed, when the device pool is short) and its host page is pinned. Returns the LoadPlan
of those copies, or None when nothing comes from the host.)";

constexpr const char* kGroupSpecDoc =
    R"(One group of a Coordinator: kind 'full', 'sliding' (needs a window) or 'state';
live_tail_alloc only for sliding.

live_tail_alloc=True gives a hole (page 0) to every slot of a chunk that is out of the
window at the chunk's end and is no resume page. Safe only for a group whose kernels never
read the current chunk's own entries from the pool during that chunk's forward:

- conv (W = kernel width): the kernel reads the chunk from the packed activations and only
  the last W - 1 earlier tokens from pages: safe;
- sliding attention with a ragged + paged prefill (the chunk's K/V from activations, only
  earlier context from pages): safe;
- sliding attention whose prefill writes the chunk into its pages and reads it back: keep
  live tail off, or it reads holes.)";

}  // namespace

#include "bind_plan.inc"  // Coordinator.plan_step / apply_step (semantics section 9)
#include "bind_host.inc"  // HostPool, offload and load plans (semantics section 10)
#ifdef LIVETAIL_SANITIZE
namespace livetail {
void bind_sanitizer_control(nb::module_& m);  // test-only: sanitize_control.cpp
}
#endif

// --- module ----------------------------------------------------------------------------------

NB_MODULE(_core, m) {
  m.doc() = "livetail native core: paged KV-cache block manager with live-tail allocation.";
  m.attr("__version__") = LIVETAIL_VERSION;

  nb::class_<BlockPool>(m, "BlockPool", nb::is_final(), nb::is_weak_referenceable(),
                        nb::sig("@typing.final\nclass BlockPool()"),
                        "Pages 0..num_blocks-1; page 0 is the null page, never allocated.\n\n"
                        "Free pages wait in one queue, initially 1, 2, ..., num_blocks-1. A page\n"
                        "whose count drops to 0 joins its back if named, its front if not\n"
                        "(retention=False: always the back, the earlier order).")
      .def(
          "__init__",
          [](BlockPool* self, Count num_blocks, bool retention, bool events) {
            new (self) BlockPool(as_count(num_blocks.obj, "num_blocks"), retention, events);
          },
          "num_blocks"_a, "retention"_a = true, "events"_a = false)
      .def_prop_ro("retention", &BlockPool::retention)
      .def_prop_ro("num_blocks", &BlockPool::num_blocks)
      .def_prop_ro("num_free", &BlockPool::num_free, "Pages in the free queue.")
      .def_prop_ro("num_pinned", &BlockPool::num_pinned,
                   "Non-null pages out of the queue: num_free + num_pinned == num_blocks - 1.")
      .def_prop_ro("num_cached", &BlockPool::num_cached,
                   "Pages that carry a prefix-cache name (in use or free).")
      .def_prop_ro("num_cached_free", &BlockPool::num_cached_free,
                   "Named pages in the free queue: matchable until an allocation evicts them.")
      .def("stats", &py::pool_stats, "Counters and gauges by name (README: Counters). O(1).")
      .def("take_events", &py::take_events,
           "The queued events in order, emptying the queue (README: Events).")
      .def(
          "free_queue",
          [](const BlockPool& p) {
            Int32Array a = new_int32_array(1, static_cast<size_t>(p.num_free()), false);
            p.copy_free_queue(a.data);
            return std::move(a.array);
          },
          nb::sig("def free_queue(self) -> numpy.typing.NDArray[numpy.int32]"),
          "The free pages in queue order (next to be allocated first), as int32.")
      .def(
          "ref_count",
          [](const BlockPool& p, Count page) { return p.ref_count(as_count(page.obj, "page")); },
          "page"_a, "Reference count of one page (0 while queued, and for the null page).")
      .def(
          "ref_counts",
          [](const BlockPool& p) {
            Int32Array a = new_int32_array(1, static_cast<size_t>(p.num_blocks()), false);
            p.copy_ref_counts(a.data);
            return std::move(a.array);
          },
          nb::sig("def ref_counts(self) -> numpy.typing.NDArray[numpy.int32]"),
          "Reference counts of every page, indexed by page id, as int32.")
      .def("__repr__", &pool_repr);

  nb::class_<PyTable>(m, "BlockTable", nb::is_final(), nb::sig("@typing.final\nclass BlockTable()"),
                      "One request's slots in one group: slot s covers tokens [s*B, (s+1)*B)\n"
                      "and holds a page id (0 = hole). Bound to a pool by its first acquire,\n"
                      "unbound by free; while bound it keeps that pool alive.")
      .def(nb::init<>())
      .def("__len__", [](const PyTable& t) { return t.size(); })
      .def_prop_ro(
          "tail_available", [](const PyTable& t) { return t.tail_available(); },
          "Unused token room in the last slot.")
      .def_prop_ro(
          "reclaim_floor", [](const PyTable& t) { return t.reclaim_floor(); },
          "Slots below it were scanned by reclaim and are never revisited.")
      .def_prop_ro(
          "extent", [](const PyTable& t) { return t.extent(); },
          "Tokens covered: len(self) * block_size - tail_available.")
      .def_prop_ro(
          "num_real_pages", [](const PyTable& t) { return t.num_real_pages(); },
          "Slots holding a real page (not a hole).")
      .def_prop_ro("is_bound", [](const PyTable& t) { return t.is_bound(); })
      .def_prop_ro(
          "block_size", [](const PyTable& t) { return t.block_size(); },
          "Page size of the group that filled it (0 while unbound).")
      .def_prop_ro(
          "pool",
          [](const PyTable& t) {
            return nb::typed<nb::object, std::optional<BlockPool>>(
                t.pool_ref.is_valid() ? t.pool_ref : nb::none());
          },
          "The pool it is bound to, or None.")
      .def(
          "page_ids", [](const PyTable& t) { return int32_vector(t.page_ids()); },
          nb::sig("def page_ids(self) -> numpy.typing.NDArray[numpy.int32]"),
          "Page id of every slot (0 = hole), as a new int32 array.")
      .def("__repr__", [](const PyTable& t) {
        return "BlockTable(len=" + std::to_string(t.size()) +
               ", num_real_pages=" + std::to_string(t.num_real_pages()) +
               ", tail_available=" + std::to_string(t.tail_available()) +
               ", reclaim_floor=" + std::to_string(t.reclaim_floor()) +
               ", extent=" + std::to_string(t.extent()) +
               ", is_bound=" + (t.is_bound() ? "True" : "False") + ")";
      });
  table_type = nb::type<PyTable>().ptr();

  using PoolArg = nb::handle_t<BlockPool>;
  nb::class_<Manager>(m, "Manager",
                      "Base of the three managers: a policy object holding only its geometry;\n"
                      "every call is handed the pool and table it acts on.")
      .def_prop_ro(
          "kind", [](const Manager& g) { return kind_name(g.kind()); },
          nb::sig("def kind(self) -> typing.Literal['full', 'sliding', 'state']"))
      .def_prop_ro("block_size", &Manager::block_size)
      .def_prop_ro(
          "sliding_window",
          [](const Manager& g) -> std::optional<int64_t> {
            if (g.kind() == GroupKind::full) return std::nullopt;
            return g.sliding_window();
          },
          "The window W (None for full attention, 2 for state).")
      .def_prop_ro("live_alloc_alignment", &Manager::live_alloc_alignment,
                   "Live-tail alignment A in tokens (0 = live tail off).")
      .def(
          "acquire",
          [](const Manager& g, PoolArg pool, PyTable& t, Count num_tokens) {
            const bool ok = g.acquire(*nb::inst_ptr<BlockPool>(pool), t,
                                      as_count(num_tokens.obj, "num_tokens"));
            keep_pool(t, pool.ptr());
            return ok;
          },
          "pool"_a, "table"_a, "num_tokens"_a,
          "Extend the table by num_tokens tokens. All or nothing: False (nothing changed)\n"
          "if the pool has fewer free pages than blocks_needed_for(table, num_tokens).")
      .def(
          "blocks_needed_for",
          [](const Manager& g, const PyTable& t, Count num_tokens) {
            return g.blocks_needed_for(t, as_count(num_tokens.obj, "num_tokens"));
          },
          "table"_a, "num_tokens"_a, "Pages acquire(num_tokens) would take, in O(1).")
      .def(
          "blocks_needed_for_sequential",
          [](const Manager& g, const PyTable& t, Count first_tokens, Count extra_tokens) {
            return g.blocks_needed_for_sequential(t, as_count(first_tokens.obj, "first_tokens"),
                                                  as_count(extra_tokens.obj, "extra_tokens"));
          },
          "table"_a, "first_tokens"_a, "extra_tokens"_a,
          "Pages acquire(first_tokens) then acquire(extra_tokens) take together: the\n"
          "admission charge for a chunk and its decode reserve. O(1).")
      .def(
          "reclaim_expired",
          [](const Manager& g, PoolArg pool, PyTable& t, Count num_computed_tokens) {
            return g.reclaim_expired(*nb::inst_ptr<BlockPool>(pool), t,
                                     as_count(num_computed_tokens.obj, "num_computed_tokens"));
          },
          "pool"_a, "table"_a, "num_computed_tokens"_a,
          "Punch every real slot below slid_out(num_computed_tokens) into a hole; returns the\n"
          "pages that re-entered the free queue. Full attention releases nothing.")
      .def(
          "blocks_reclaimable_at",
          [](const Manager& g, const PyTable& t, Count num_computed_tokens, bool count_uncached) {
            return g.blocks_reclaimable_at(
                t, as_count(num_computed_tokens.obj, "num_computed_tokens"), count_uncached);
          },
          "table"_a, "num_computed_tokens"_a, "count_uncached"_a = true,
          "Pages reclaim_expired(num_computed_tokens) would return to the free queue now: real\n"
          "slots below slid_out whose page has reference count 1 (with count_uncached=False,\n"
          "only those that carry a prefix-cache name).")
      .def(
          "free",
          [](const Manager& g, PoolArg pool, PyTable& t) {
            g.free(*nb::inst_ptr<BlockPool>(pool), t);
            keep_pool(t, pool.ptr());
          },
          "pool"_a, "table"_a,
          "Free every page (in slot order, as one batch) and empty and unbind the table.")
      .def("__repr__", &manager_repr);

  nb::class_<FullAttentionManager, Manager>(
      m, "FullAttentionManager", nb::is_final(),
      nb::sig("@typing.final\nclass FullAttentionManager(Manager)"),
      "Every slot gets a real page; nothing is reclaimed.")
      .def(
          "__init__",
          [](FullAttentionManager* self, Count block_size) {
            new (self) FullAttentionManager(as_count(block_size.obj, "block_size"));
          },
          "block_size"_a);

  nb::class_<SlidingWindowManager, Manager>(
      m, "SlidingWindowManager", nb::is_final(),
      nb::sig("@typing.final\nclass SlidingWindowManager(Manager)"),
      "Window of sliding_window tokens; pages that slide out are reclaimed. With\n"
      "live_alloc_alignment = A > 0 (a multiple of block_size), an acquire gives a real page\n"
      "only to slots in the live tail or among the resume pages behind each A boundary.")
      .def(
          "__init__",
          [](SlidingWindowManager* self, Count block_size, Count sliding_window,
             Count live_alloc_alignment) {
            new (self)
                SlidingWindowManager(as_count(block_size.obj, "block_size"),
                                     as_count(sliding_window.obj, "sliding_window"),
                                     as_count(live_alloc_alignment.obj, "live_alloc_alignment"));
          },
          "block_size"_a, "sliding_window"_a, "live_alloc_alignment"_a = 0);

  nb::class_<StateManager, Manager>(
      m, "StateManager", nb::is_final(), nb::sig("@typing.final\nclass StateManager(Manager)"),
      "Mamba/SSM state: a sliding group with W = 2 and no live tail;\n"
      "only the last page is kept once reclaimed.")
      .def(
          "__init__",
          [](StateManager* self, Count block_size) {
            new (self) StateManager(as_count(block_size.obj, "block_size"));
          },
          "block_size"_a);

  nb::class_<GroupSpec>(m, "GroupSpec", nb::is_final(), nb::sig("@typing.final\nclass GroupSpec()"),
                        kGroupSpecDoc)
      .def(
          "__init__",
          [](GroupSpec* self, Str kind, Count block_size, Count sliding_window,
             bool live_tail_alloc) {
            if (!PyUnicode_Check(kind.obj)) type_fail("kind", "a str", kind.obj);
            Py_ssize_t len = 0;
            const char* s = PyUnicode_AsUTF8AndSize(kind.obj, &len);
            if (s == nullptr) throw nb::python_error();
            std::optional<int64_t> w;
            if (sliding_window.obj != Py_None) w = as_count(sliding_window.obj, "sliding_window");
            new (self) GroupSpec(parse_kind({s, static_cast<size_t>(len)}),
                                 as_count(block_size.obj, "block_size"), w, live_tail_alloc);
          },
          "kind"_a, "block_size"_a, "sliding_window"_a = nb::none(), "live_tail_alloc"_a = false)
      .def_prop_ro(
          "kind", [](const GroupSpec& s) { return kind_name(s.kind); },
          nb::sig("def kind(self) -> typing.Literal['full', 'sliding', 'state']"))
      .def_ro("block_size", &GroupSpec::block_size)
      .def_ro("sliding_window", &GroupSpec::sliding_window)
      .def_ro("live_tail_alloc", &GroupSpec::live_tail_alloc)
      .def(nb::self == nb::self, nb::sig("def __eq__(self, arg: object, /) -> bool"))
      .def("__hash__",
           [](const GroupSpec& s) {
             return nb::hash(nb::make_tuple(static_cast<int>(s.kind), s.block_size,
                                            s.sliding_window, s.live_tail_alloc));
           })
      .def("__repr__", &spec_repr);

  nb::class_<PrefixMatch>(
      m, "PrefixMatch", nb::is_final(), nb::sig("@typing.final\nclass PrefixMatch()"),
      "The result of Coordinator.match_prefix: num_tokens and, per group, the page id of each\n"
      "slot below it (0 = hole). It remembers its coordinator and the name every real page was\n"
      "matched under, so that claim can tell whether it is still valid. Not constructible.")
      .def_prop_ro("num_tokens", &PrefixMatch::num_tokens,
                   "The matched prefix in tokens: a multiple of the coordinator's lcm_block_size.")
      .def_prop_ro(
          "pages",
          [](const PrefixMatch& mt) {
            nb::list out;
            for (int64_t g = 0; g < mt.num_groups(); ++g) out.append(int32_vector(mt.pages(g)));
            return out;
          },
          nb::sig("def pages(self) -> list[numpy.typing.NDArray[numpy.int32]]"),
          "Per group, a new int32 array: the page of each slot below num_tokens (0 = hole).")
      .def_prop_ro("host_pages", &host_pages_py,
                   nb::sig("def host_pages(self) -> list[numpy.typing.NDArray[numpy.int32]]"),
                   "Per group, a new int32 array: the host page of each slot served from the\n"
                   "host tier (0 elsewhere; a device copy is preferred slot by slot).")
      .def("__repr__", [](const PrefixMatch& mt) {
        return "PrefixMatch(num_tokens=" + std::to_string(mt.num_tokens()) +
               ", real_pages=" + std::to_string(mt.num_real_pages()) + ")";
      });

  nb::class_<PyCoordinator>(
      m, "Coordinator", nb::is_final(), nb::sig("@typing.final\nclass Coordinator()"),
      "Several groups sharing one pool; each request has one table per group. base_block_size\n"
      "and lcm_block_size are the gcd and lcm of the page sizes; live-tail sliding groups align\n"
      "to the lcm. Every call checks every group's arguments before any group acts, and groups\n"
      "act in ascending index.")
      .def(
          "__init__",
          [](PyCoordinator* self, std::vector<GroupSpec> specs, PoolArg pool, HostPool* host) {
            auto* c = new (self) PyCoordinator(std::move(specs), pool, host);
            for (const Manager& g : c->managers()) {
              switch (g.kind()) {
                case GroupKind::full:
                  c->managers_py.append(nb::cast(FullAttentionManager(g.block_size())));
                  break;
                case GroupKind::sliding:
                  c->managers_py.append(nb::cast(SlidingWindowManager(
                      g.block_size(), g.sliding_window(), g.live_alloc_alignment())));
                  break;
                case GroupKind::state:
                  c->managers_py.append(nb::cast(StateManager(g.block_size())));
                  break;
              }
            }
          },
          "specs"_a, "pool"_a, "host"_a.none() = nb::none())
      .def_prop_ro("base_block_size", &Coordinator::base_block_size)
      .def_prop_ro("lcm_block_size", &Coordinator::lcm_block_size)
      .def_prop_ro("num_groups", &Coordinator::num_groups)
      .def_prop_ro(
          "pool", [](const PyCoordinator& c) -> BlockPool& { return c.pool(); },
          nb::rv_policy::reference, "The pool every group allocates from.")
      .def_prop_ro("host", &host_of, nb::sig("def host(self) -> HostPool | None"),
                   "The host tier's pool (semantics section 10), None without one.")
      .def_prop_ro("specs", &Coordinator::specs)
      .def_prop_ro(
          "managers",
          [](const PyCoordinator& c) {
            return nb::typed<nb::list, Manager>(nb::list(c.managers_py));
          },
          "One manager per group, in group order.")
      .def(
          "new_tables",
          [](const PyCoordinator& c) {
            nb::typed<nb::list, PyTable> out;
            for (int64_t g = 0; g < c.num_groups(); ++g) out.append(nb::cast(PyTable()));
            return out;
          },
          "Fresh tables for one request, one per group.")
      .def(
          "acquire",
          [](PyCoordinator& c, Tables tables, Count num_tokens) {
            const int64_t n = as_count(num_tokens.obj, "num_tokens");  // may run __index__
            TableList ts(tables.obj, "tables");
            const bool ok = c.acquire(ts.span(), n);
            ts.keep_pools(c.pool_ref.ptr());
            return ok;
          },
          "tables"_a, "num_tokens"_a,
          "Acquire num_tokens in every group, all or nothing: False (nothing changed in any\n"
          "group) if the summed need exceeds the pool's free pages.")
      .def(
          "blocks_needed_for",
          [](const PyCoordinator& c, Tables tables, Count num_tokens) {
            const int64_t n = as_count(num_tokens.obj, "num_tokens");
            TableList ts(tables.obj, "tables");
            return c.blocks_needed_for(ts.span(), n);
          },
          "tables"_a, "num_tokens"_a, "Sum over groups of the pages acquire would take.")
      .def(
          "blocks_needed_for_sequential",
          [](const PyCoordinator& c, Tables tables, Count first_tokens, Count extra_tokens) {
            const int64_t first = as_count(first_tokens.obj, "first_tokens");
            const int64_t extra = as_count(extra_tokens.obj, "extra_tokens");
            TableList ts(tables.obj, "tables");
            return c.blocks_needed_for_sequential(ts.span(), first, extra);
          },
          "tables"_a, "first_tokens"_a, "extra_tokens"_a,
          "Sum over groups of the sequential charge (chunk, then decode reserve).")
      .def(
          "reclaim_expired",
          [](PyCoordinator& c, Tables tables, Count num_computed_tokens) {
            const int64_t f = as_count(num_computed_tokens.obj, "num_computed_tokens");
            TableList ts(tables.obj, "tables");
            return c.reclaim_expired(ts.span(), f);
          },
          "tables"_a, "num_computed_tokens"_a,
          "Reclaim in every group; returns the pages that re-entered the free queue.")
      .def(
          "free",
          [](PyCoordinator& c, Tables tables) {
            TableList ts(tables.obj, "tables");
            c.free(ts.span());
            ts.keep_pools(c.pool_ref.ptr());
          },
          "tables"_a, "Free every group's table (ascending group index).")
      .def(
          "decode_step",
          [](PyCoordinator& c, Any requests, Any num_computed_tokens) {
            nb::object seq =
                nb::steal(PySequence_Fast(requests.obj, "requests must be a sequence"));
            if (!seq.is_valid()) throw nb::python_error();
            PyObject* rs = seq.ptr();
            const Py_ssize_t nreq = seq_size(rs);
            // Frontiers first: __index__ is Python code that could change the lists under us.
            const std::vector<int64_t> fronts =
                as_frontiers(num_computed_tokens.obj, static_cast<size_t>(nreq));
            const auto g = static_cast<size_t>(c.num_groups());
            std::vector<BlockTable*> flat;
            flat.reserve(static_cast<size_t>(nreq) * g);
            for (Py_ssize_t r = 0; r < nreq; ++r) {
              PyObject* ts = seq_item(rs, r);
              auto at = [r] { return "requests[" + std::to_string(r) + "]"; };  // errors only
              if (!PyList_Check(ts) && !PyTuple_Check(ts))
                type_fail(at().c_str(), "a list or tuple of BlockTable", ts);
              const Py_ssize_t n = seq_size(ts);
              if (static_cast<size_t>(n) != g)
                throw std::invalid_argument(at() + " must hold one table per group (" +
                                            std::to_string(g) + "), got " + std::to_string(n));
              for (Py_ssize_t k = 0; k < n; ++k) {
                PyObject* tk = seq_item(ts, k);
                if (Py_TYPE(tk) != reinterpret_cast<PyTypeObject*>(table_type))
                  type_fail(at().c_str(), "a list or tuple of BlockTable", tk);
                flat.push_back(as_table(tk, "table"));
              }
            }
            const DecodeResult res = c.decode_step(flat, fronts);
            for (size_t i = 0; i < static_cast<size_t>(res.stepped) * g; ++i)
              keep_pool(*static_cast<PyTable*>(flat[i]), c.pool_ref.ptr());
            return nb::make_tuple(res.stepped, res.reclaimed);
          },
          "requests"_a, "num_computed_tokens"_a,
          nb::sig("def decode_step(self, requests: collections.abc.Sequence[list[BlockTable] | "
                  "tuple[BlockTable, ...]], num_computed_tokens: "
                  "collections.abc.Sequence[typing.SupportsIndex] | "
                  "numpy.typing.NDArray[numpy.integer]) -> tuple[int, int]"),
          kDecodeDoc)
      .def(
          "cache_full_blocks",
          [](PyCoordinator& c, Tables tables, Any keys, Count num_tokens) {
            const int64_t n = as_count(num_tokens.obj, "num_tokens");  // may run __index__
            const std::span<const Key> ks = as_keys(keys.obj);
            TableList ts(tables.obj, "tables");
            return c.cache_full_blocks(ts.span(), ks, n);
          },
          "tables"_a, "keys"_a.none(), "num_tokens"_a,
          nb::sig(
              "def cache_full_blocks(self, tables: list[BlockTable] | tuple[BlockTable, ...], "
              "keys: list[bytes] | tuple[bytes, ...], num_tokens: typing.SupportsIndex) -> int"),
          kCacheDoc)
      .def(
          "match_prefix",
          [](const PyCoordinator& c, Any keys) { return c.match_prefix(as_keys(keys.obj)); },
          "keys"_a.none(),
          nb::sig("def match_prefix(self, keys: list[bytes] | tuple[bytes, ...]) -> PrefixMatch"),
          kMatchDoc)
      .def(
          "blocks_consumed_by_claim",
          [](const PyCoordinator& c, const PrefixMatch& match) {
            return c.blocks_consumed_by_claim(match);
          },
          "match"_a,
          "The matched real pages that are free now: the free pages claim(match) takes. Charge\n"
          "it plus blocks_needed_for_sequential on fresh tables for the rest of the chunk and\n"
          "the decode reserve. A stale match or one of another coordinator is a ValueError.")
      .def(
          "claim",
          [](PyCoordinator& c, Tables tables, const PrefixMatch& match) {
            return claim_py(c, tables.obj, match);
          },
          "tables"_a, "match"_a,
          nb::sig("def claim(self, tables: list[BlockTable] | tuple[BlockTable, ...], match: "
                  "PrefixMatch) -> LoadPlan | None"),
          kClaimDoc)
      .def("stats", [](const PyCoordinator& c) { return py::coordinator_stats(c); },
           "The pool's stats plus pinned_pages: the pages each group pins now.")
      .def("__repr__", [](const PyCoordinator& c) {
        std::string r = "Coordinator([";
        for (size_t i = 0; i < c.specs().size(); ++i)
          r += (i ? ", " : "") + spec_repr(c.specs()[i]);
        return r + "], " + pool_repr(c.pool()) + ")";
      });

  m.def(
      "page_keys",
      [](Any tokens, Count base_block_size, Any salt) {
        const int64_t base = as_count(base_block_size.obj, "base_block_size");
        if (base < 1 || base > geometry::INT32_MAX_TOKENS)
          throw std::invalid_argument("base_block_size must be in [1, 2**31 - 1], got " +
                                      std::to_string(base));
        PyObject* so = salt.obj;
        if (!PyBytes_Check(so) && !PyByteArray_Check(so) && !PyMemoryView_Check(so))
          type_fail("salt", "bytes", so);
        nb::object sb = nb::steal(PyBytes_FromObject(so));  // a copy: tokens may run code
        if (!sb.is_valid()) throw nb::python_error();
        const Tokens toks(tokens.obj);
        const std::span<const uint8_t> sv(reinterpret_cast<const uint8_t*>(bytes_data(sb.ptr())),
                                          static_cast<size_t>(bytes_size(sb.ptr())));
        std::vector<Key> keys;
        {
          nb::gil_scoped_release unlocked;  // hashing touches no Python object
          keys = page_keys(toks.span(), base, sv);
        }
        return key_list(keys);
      },
      "tokens"_a, "base_block_size"_a, "salt"_a = nb::bytes("", 0),
      nb::sig("def page_keys(tokens: collections.abc.Iterable[typing.SupportsIndex] | "
              "numpy.typing.NDArray[numpy.integer], base_block_size: typing.SupportsIndex, "
              "salt: bytes | bytearray | memoryview = b'') -> list[bytes]"),
      kPageKeysDoc);

  m.def(
      "_sha256",
      [](nb::bytes data, bool accelerated) {
        Sha256 h(accelerated);
        h.update(data.c_str(), data.size());
        const Key k = h.digest();
        return nb::bytes(reinterpret_cast<const char*>(k.data()), k.size());
      },
      "data"_a, "accelerated"_a = true,
      "SHA-256 of data (tests compare both compression functions with hashlib).");
  m.attr("_sha256_implementation") = Sha256::implementation();

  m.def(
      "page_ids_batch",
      [](Tables tables, Count width) {
        // Counts first: __index__ is Python code that could change the list under us.
        const bool fixed = width.obj != Py_None;
        const auto want = fixed ? static_cast<size_t>(as_count(width.obj, "width")) : 0;
        TableList ts(tables.obj, "tables");
        size_t w = 0;
        for (BlockTable* t : ts.span()) w = std::max(w, static_cast<size_t>(t->size()));
        if (fixed) {
          if (want < w)
            throw std::invalid_argument("width = " + std::to_string(want) +
                                        " is below the longest table (" + std::to_string(w) + ")");
          w = want;
        }
        const size_t rows = ts.span().size();
        Int32Array a = new_int32_array(rows, w, true);
        for (size_t r = 0; r < rows; ++r) {
          const std::span<const int32_t> ids = ts.span()[r]->page_ids();
          int32_t* row = a.data + r * w;
          if (!ids.empty()) std::memcpy(row, ids.data(), ids.size_bytes());
          std::memset(row + ids.size(), 0, (w - ids.size()) * sizeof(int32_t));
        }
        return std::move(a.array);
      },
      "tables"_a, "width"_a = nb::none(),
      nb::sig("def page_ids_batch(tables: list[BlockTable] | tuple[BlockTable, ...], "
              "width: typing.SupportsIndex | None = None) -> numpy.typing.NDArray[numpy.int32]"),
      "Page ids of many tables as one 2-D int32 array, one row per table, padded with 0\n"
      "(a hole) to `width` columns (default: the longest table; a smaller width is an error).");
  bind_plan(m);
  bind_host(m);

#ifdef LIVETAIL_SANITIZE
  livetail::bind_sanitizer_control(m);
#endif
}
