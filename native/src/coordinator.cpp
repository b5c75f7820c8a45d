#include "livetail/coordinator.h"

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <string>

namespace livetail {

namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw std::invalid_argument(name + " " + what);
}

std::string at(const char* name, size_t i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

// Batch calls stamp each table they see; a repeat shows as a stamp already equal to this
// call's. Atomic so that coordinators used from different threads never share a stamp.
std::atomic<uint64_t> next_visit{1};

}  // namespace

GroupSpec::GroupSpec(GroupKind kind, int64_t block_size, std::optional<int64_t> sliding_window,
                     bool live_tail_alloc)
    : kind(kind),
      block_size(block_size),
      sliding_window(sliding_window),
      live_tail_alloc(live_tail_alloc) {
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
}

Coordinator::Coordinator(std::vector<GroupSpec> specs, BlockPool& pool)
    : specs_(std::move(specs)), pool_(&pool) {
  if (specs_.empty()) fail("specs", "must name at least one group");
  base_ = specs_[0].block_size;
  lcm_ = specs_[0].block_size;
  for (const GroupSpec& s : specs_) {
    s.check();  // the fields are public: check them again
    base_ = std::gcd(base_, s.block_size);
    lcm_ = std::lcm(lcm_, s.block_size);  // both <= 2**31 - 1, so no int64 overflow
    if (lcm_ > geometry::INT32_MAX_TOKENS)
      fail("specs", "have page sizes whose lcm exceeds 2**31 - 1");
  }
  managers_.reserve(specs_.size());
  for (const GroupSpec& s : specs_) {
    switch (s.kind) {
      case GroupKind::full:
        managers_.push_back(FullAttentionManager(s.block_size));
        break;
      case GroupKind::sliding:
        // Live-tail groups align to the lcm so every group can resume at the same boundaries.
        managers_.push_back(
            SlidingWindowManager(s.block_size, *s.sliding_window, s.live_tail_alloc ? lcm_ : 0));
        break;
      case GroupKind::state:
        managers_.push_back(StateManager(s.block_size));
        break;
    }
  }
}

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

// One table per group, non-null, pairwise distinct (groups are few: the pairs are cheap),
// each unbound or bound to this pool and filled by this group's page size.
inline void Coordinator::check_tables(std::span<BlockTable* const> tables) const {
  const size_t g = managers_.size();
  if (tables.size() != g) [[unlikely]]
    fail_tables(tables);
  for (size_t i = 0; i < g; ++i) {
    bool ok = tables[i] != nullptr;
    for (size_t j = 0; j < i; ++j) ok &= tables[j] != tables[i];
    if (!ok) [[unlikely]]
      fail_tables(tables);
    managers_[i].check_table(pool_, *tables[i]);
  }
}

bool Coordinator::acquire(std::span<BlockTable* const> tables, int64_t num_tokens) {
  Manager::check_count(num_tokens, "num_tokens");
  check_tables(tables);
  const Manager* m = managers_.data();
  const size_t g = managers_.size();
  int64_t need = 0;  // summed once, from the closed forms: no group acts unless every group can
  for (size_t i = 0; i < g; ++i) {
    const BlockTable& t = *tables[i];
    m[i].check_fits(t.size(), t.tail_, num_tokens, "num_tokens");
    need += m[i].needed_unchecked(t, num_tokens);
  }
  if (num_tokens == 0) return true;
  if (need > pool_->num_free()) return false;
  for (size_t i = 0; i < g; ++i) m[i].reserve_unchecked(*tables[i], num_tokens);  // may throw
  for (size_t i = 0; i < g; ++i) m[i].acquire_unchecked(*pool_, *tables[i], num_tokens);
  return true;
}

int64_t Coordinator::blocks_needed_for(std::span<BlockTable* const> tables,
                                       int64_t num_tokens) const {
  Manager::check_count(num_tokens, "num_tokens");
  check_tables(tables);
  int64_t need = 0;
  for (size_t i = 0; i < managers_.size(); ++i) {
    const BlockTable& t = *tables[i];
    managers_[i].check_fits(t.size(), t.tail_, num_tokens, "num_tokens");
    need += managers_[i].needed_unchecked(t, num_tokens);
  }
  return need;
}

int64_t Coordinator::blocks_needed_for_sequential(std::span<BlockTable* const> tables,
                                                  int64_t first_tokens,
                                                  int64_t extra_tokens) const {
  Manager::check_count(first_tokens, "first_tokens");
  Manager::check_count(extra_tokens, "extra_tokens");
  check_tables(tables);
  int64_t need = 0;
  for (size_t i = 0; i < managers_.size(); ++i)  // each call checks before it sums
    need += managers_[i].blocks_needed_for_sequential(*tables[i], first_tokens, extra_tokens);
  return need;
}

int64_t Coordinator::reclaim_expired(std::span<BlockTable* const> tables,
                                     int64_t num_computed_tokens) {
  check_tables(tables);
  for (size_t i = 0; i < managers_.size(); ++i)
    managers_[i].check_frontier(*tables[i], num_computed_tokens);
  int64_t reentered = 0;
  for (size_t i = 0; i < managers_.size(); ++i)
    reentered += managers_[i].reclaim_unchecked(*pool_, *tables[i], num_computed_tokens);
  return reentered;
}

int64_t Coordinator::free(std::span<BlockTable* const> tables) {
  check_tables(tables);
  int64_t reentered = 0;
  for (size_t i = 0; i < managers_.size(); ++i)
    if (tables[i]->is_bound()) reentered += managers_[i].free_unchecked(*pool_, *tables[i]);
  return reentered;
}

DecodeResult Coordinator::decode_step(std::span<BlockTable* const> tables,
                                      std::span<const int64_t> num_computed_tokens) {
  const size_t g = managers_.size();
  const size_t r = num_computed_tokens.size();
  if (tables.size() != r * g)
    fail("requests", "must hold " + std::to_string(g) + " tables per request (" +
                         std::to_string(r) + " requests), got " + std::to_string(tables.size()));
  const uint64_t visit = next_visit.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < tables.size(); ++i) {
    BlockTable* t = tables[i];
    const size_t req = i / g;
    const Manager& m = managers_[i % g];
    const int64_t f = num_computed_tokens[req];
    try {  // messages are built only on failure: validation stays cheap per table
      if (t == nullptr) fail("table", "is null");
      if (t->visit_ == visit) fail("table", "appears twice in the batch");
      t->visit_ = visit;
      m.check_table(pool_, *t);
      m.check_fits(t->size(), t->tail_, 1, "num_tokens");
      Manager::check_count(f, "num_computed_tokens");
      // The reclaim runs after the acquire, so its frontier may reach the new token.
      if (f > geometry::extent(t->size(), t->tail_, m.block_size()) + 1)
        fail("num_computed_tokens",
             "= " + std::to_string(f) + " is above the extent " + "the acquire leaves");
    } catch (const std::invalid_argument& e) {
      fail("requests[" + std::to_string(req) + "][" + std::to_string(i % g) + "]:", e.what());
    }
  }
  for (size_t i = 0; i < tables.size(); ++i) managers_[i % g].reserve_unchecked(*tables[i], 1);
  DecodeResult res{0, 0};
  const Manager* m = managers_.data();
  for (; res.stepped < static_cast<int64_t>(r); ++res.stepped) {
    BlockTable* const* ts = tables.data() + static_cast<size_t>(res.stepped) * g;
    int64_t need = 0;
    for (size_t k = 0; k < g; ++k) need += m[k].needed_unchecked(*ts[k], 1);
    if (need > pool_->num_free()) break;
    const int64_t f = num_computed_tokens[static_cast<size_t>(res.stepped)];
    for (size_t k = 0; k < g; ++k) m[k].acquire_unchecked(*pool_, *ts[k], 1);
    for (size_t k = 0; k < g; ++k) res.reclaimed += m[k].reclaim_unchecked(*pool_, *ts[k], f);
  }
  return res;
}

}  // namespace livetail
