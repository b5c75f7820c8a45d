// GroupSpec and the Coordinator's construction: the specs' checks, the base and lcm page
// sizes, one manager per group; and the out-of-line paths of the operations' table checks
// (the general checks and the messages; their inline fast tests are in coordinator.cpp).
// The operations are in coordinator.cpp (device, prefix caching), plan.cpp (step planning)
// and host.cpp (host tier).
#include <atomic>
#include <numeric>
#include <stdexcept>
#include <string>

#include "livetail/coordinator.h"
#include "fail.h"

namespace livetail {

using detail::fail;
using detail::at;

namespace {

// Coordinator ids, so that a PrefixMatch knows its coordinator (0 = none).
std::atomic<uint64_t> next_coordinator{1};

}  // namespace

GroupSpec::GroupSpec(GroupKind kind, int64_t block_size, std::optional<int64_t> sliding_window,
                     bool live_tail_alloc, std::optional<int64_t> attention_chunk_size)
    : kind(kind),
      block_size(block_size),
      sliding_window(sliding_window),
      live_tail_alloc(live_tail_alloc),
      attention_chunk_size(attention_chunk_size) {
  check();
}

void GroupSpec::check() const {
  if (block_size < 1 || block_size > geometry::INT32_MAX_TOKENS)
    fail("block_size", "must be in [1, 2**31 - 1], got " + std::to_string(block_size));
  if (kind == GroupKind::sliding && !sliding_window)
    fail("sliding_window", "is required for a sliding group");
  if (kind != GroupKind::sliding && sliding_window)
    fail("sliding_window", std::string("is only taken by sliding groups, not ") + kind_name(kind));
  if (sliding_window && (*sliding_window < 1 || *sliding_window > geometry::INT32_MAX_TOKENS))
    fail("sliding_window", "must be in [1, 2**31 - 1], got " + std::to_string(*sliding_window));
  if (kind != GroupKind::sliding && live_tail_alloc)
    fail("live_tail_alloc", std::string("is only taken by sliding groups, not ") + kind_name(kind));
  if (kind == GroupKind::chunked && !attention_chunk_size)
    fail("attention_chunk_size", "is required for a chunked group");
  if (kind != GroupKind::chunked && attention_chunk_size)
    fail("attention_chunk_size",
         std::string("is only taken by chunked groups, not ") + kind_name(kind));
  if (attention_chunk_size) {
    const int64_t C = *attention_chunk_size;
    if (C < 1 || C > geometry::INT32_MAX_TOKENS)
      fail("attention_chunk_size", "must be in [1, 2**31 - 1], got " + std::to_string(C));
    if (C % block_size != 0)
      fail("attention_chunk_size", "must be a multiple of block_size " +
                                       std::to_string(block_size) + ", got " + std::to_string(C));
  }
}

Coordinator::Coordinator(std::vector<GroupSpec> specs, BlockPool& pool, HostPool* host,
                         int64_t alignment)
    : specs_(std::move(specs)),
      pool_(&pool),
      host_(host),
      id_(next_coordinator.fetch_add(1, std::memory_order_relaxed)) {
  if (specs_.empty()) fail("specs", "must name at least one group");
  // Sums over groups of per-group counts (each <= 2**31 - 1) then fit int64.
  if (specs_.size() > static_cast<size_t>(geometry::INT32_MAX_TOKENS))
    fail("specs", "must name at most 2**31 - 1 groups");
  base_ = specs_[0].block_size;
  lcm_ = specs_[0].block_size;
  for (const GroupSpec& s : specs_) {
    s.check();  // the fields are public: check them again
    base_ = std::gcd(base_, s.block_size);
    lcm_ = std::lcm(lcm_, s.block_size);  // both <= 2**31 - 1, so no int64 overflow
    if (lcm_ > geometry::INT32_MAX_TOKENS)
      fail("specs", "have page sizes whose lcm exceeds 2**31 - 1");
  }
  if (alignment < 0 || alignment > geometry::INT32_MAX_TOKENS)
    fail("alignment", "must be in [1, 2**31 - 1], got " + std::to_string(alignment));
  if (alignment % lcm_ != 0)
    fail("alignment", "must be a multiple of the lcm of the block sizes (" +
                          std::to_string(lcm_) + "), got " + std::to_string(alignment));
  alignment_ = alignment == 0 ? lcm_ : alignment;
  pinned_.assign(specs_.size(), 0);
  managers_.reserve(specs_.size());
  for (const GroupSpec& s : specs_) {
    switch (s.kind) {
      case GroupKind::full:
        managers_.push_back(FullAttentionManager(s.block_size));
        break;
      case GroupKind::sliding:
        // Live-tail groups align to the alignment (a multiple of the lcm), so every group can
        // resume at the same boundaries.
        managers_.push_back(SlidingWindowManager(s.block_size, *s.sliding_window,
                                                 s.live_tail_alloc ? alignment_ : 0));
        break;
      case GroupKind::state:
        managers_.push_back(StateManager(s.block_size));
        break;
      case GroupKind::chunked:
        managers_.push_back(ChunkedLocalAttentionManager(s.block_size, *s.attention_chunk_size));
        break;
    }
  }
  for (Manager& m : managers_) m.owner_ = id_;  // its tables change only through it
}

// --- the table checks' out-of-line paths ---------------------------------------------------

[[gnu::cold]] void Coordinator::fail_tables(std::span<BlockTable* const> tables) const {
  const size_t g = managers_.size();
  if (tables.size() != g)
    fail("tables", "must hold one table per group (" + std::to_string(g) + "), got " +
                       std::to_string(tables.size()));
  for (size_t i = 0; i < g; ++i) {
    if (tables[i] == nullptr) fail(at("tables", i), "is null");
    for (size_t j = 0; j < i; ++j)
      if (tables[j] == tables[i])
        fail(at("tables", i), "repeats tables[" + std::to_string(j) + "]");
  }
  fail("tables", "are invalid");  // not reached: callers come here only after a failed test
}

// The per-request checks of check_tables, each table against this coordinator and against
// tables[0]: one message naming the first table that fails (nothing is thrown if none does).
[[gnu::cold]] void Coordinator::check_request(std::span<BlockTable* const> tables,
                                              const char* name) const {
  for (size_t i = 0; i < tables.size(); ++i) {
    const BlockTable& t = *tables[i];
    if (t.coordinator_ != 0 && t.coordinator_ != id_) [[unlikely]]
      fail(at(name, i), "is bound to another coordinator (a table is used only through the "
                        "coordinator that bound it, until it is freed)");
    if (t.extent() != tables[0]->extent()) [[unlikely]]
      fail(at(name, i), "has extent " + std::to_string(t.extent()) + ", " + at(name, 0) + " " +
                            std::to_string(tables[0]->extent()) +
                            ": one request's tables cover the same tokens");
  }
}

// check_tables for tables not all bound here: each table's pool and page size, then the
// per-request checks (one message naming the first table that fails).
[[gnu::noinline]] void Coordinator::check_tables_general(
    std::span<BlockTable* const> tables) const {
  bool one = true;  // each table unbound, or bound by a manager or this coordinator; one extent
  for (size_t i = 0; i < tables.size(); ++i) {
    const BlockTable* t = tables[i];
    managers_[i].check_table(pool_, *t);
    one &= (t->coordinator_ == 0) | (t->coordinator_ == id_);
    one &= t->extent() == tables[0]->extent();
  }
  if (!one) [[unlikely]]
    check_request(tables, "tables");
}

// check_member's message, built only when its test failed.
[[gnu::cold]] void Coordinator::fail_member(const BlockTable& t, const BlockTable& first) const {
  if (t.coordinator_ != 0 && t.coordinator_ != id_)
    fail("table", "is bound to another coordinator (a table is used only through the "
                  "coordinator that bound it, until it is freed)");
  if (t.extent() != first.extent())
    fail("table", "has extent " + std::to_string(t.extent()) + ", the request's first table " +
                      std::to_string(first.extent()) + ": one request's tables cover the same tokens");
  fail("table", "is invalid");  // not reached: callers come here only after a failed test
}

// Section 13.2: a chunked group's resume count depends on the boundary.
int64_t Coordinator::resume_at(size_t g, int64_t b) const noexcept {
  const Manager& m = managers_[g];
  if (m.kind() == GroupKind::chunked) [[unlikely]]
    return geometry::chunked_resume_pages(b, m.attention_chunk_size(), m.block_size());
  return resume(g);
}

int64_t Coordinator::resume_behind(size_t g, int64_t j, int64_t q) const noexcept {
  if (managers_[g].kind() != GroupKind::chunked) return resume(g);
  return resume_at(g, geometry::next_period(geometry::period_start(j, q), q));
}

}  // namespace livetail
