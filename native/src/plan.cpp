// Step planning (semantics section 9): Coordinator::plan_step and apply_step.
#include <atomic>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "livetail/coordinator.h"
#include "fail.h"

namespace livetail {

using detail::fail;

namespace {

// Stamps for repeat detection (BlockTable::visit_) and for the per-page scratch counts:
// drawn from the upper half of the range, so they never meet decode_step's stamps.
std::atomic<uint64_t> next_stamp{uint64_t{1} << 63};

// Per page: references held by the preempted suffix, valid while stamp == this call's.
struct Held {
  uint64_t stamp;
  int32_t count;
};
thread_local std::vector<Held> held;

}  // namespace

StepPlan Coordinator::plan_step(std::span<BlockTable* const> tables,
                                std::span<const int64_t> num_tokens) const {
  const size_t g = managers_.size();
  const size_t r = num_tokens.size();
  if (tables.size() != r * g)
    fail("requests", "must hold " + std::to_string(g) + " tables per request (" +
                         std::to_string(r) + " requests), got " + std::to_string(tables.size()));
  const uint64_t stamp = next_stamp.fetch_add(1, std::memory_order_relaxed);
  StepPlan plan;
  plan.tables_.assign(tables.begin(), tables.end());
  plan.tokens_.assign(num_tokens.begin(), num_tokens.end());
  plan.shapes_.resize(tables.size());
  std::vector<int64_t> needs(r, 0);
  int64_t prefix = 0;
  // Request by request, group by group (no division per table); the request's count and its
  // one extent are checked once, at its first table.
  size_t i = 0;
  for (size_t req = 0; req < r; ++req) {
    const int64_t n = num_tokens[req];
    const BlockTable* first = tables[i];  // the request's first table (one extent per request)
    int64_t extent = 0;                   // and its extent
    for (size_t j = 0; j < g; ++j, ++i) {
      BlockTable* t = tables[i];
      const Manager& m = managers_[j];
      try {  // messages are built only on failure
        if (t == nullptr) fail("table", "is null");
        if (t->visit_ == stamp) fail("table", "appears in two requests");
        t->visit_ = stamp;
        if (j == 0) extent = extent_in(*t, m);  // as t->extent() wherever it matters
        if (!bound_here(*t, m) || extent_in(*t, m) != extent) [[unlikely]] {  // check_tables
          m.check_table(pool_, *t);
          check_member(*t, *first, extent);
        }
        if (j == 0) Manager::check_count(n, "num_tokens");
        m.check_fits(t->size(), t->tail_, n, "num_tokens");
      } catch (const std::invalid_argument& e) {
        fail("requests[" + std::to_string(req) + "][" + std::to_string(j) + "]:", e.what());
      }
      plan.shapes_[i] = {t->size(), t->tail_, t->floor_, t->pool_};
      const int64_t need = m.needed_unchecked(*t, n);
      needs[req] += need;
      prefix += need;
    }
  }
  const int64_t free = pool_->num_free();
  int64_t released = 0;
  size_t k = r;
  if (prefix > free) {
    // Grow the preempted suffix from the bottom until the prefix fits: only the preempted
    // requests' slots are scanned. A page counts once its every reference is in the suffix.
    if (held.size() < static_cast<size_t>(pool_->fresh_))
      held.resize(static_cast<size_t>(pool_->fresh_), Held{0, 0});
    Held* h = held.data();
    const int32_t* ref = pool_->ref_.get();
    while (prefix > free + released) {
      --k;
      prefix -= needs[k];
      for (size_t j = k * g; j < (k + 1) * g; ++j) {
        for (const int32_t p : tables[j]->slots_) {
          if (p == 0) continue;
          Held& e = h[p];
          if (e.stamp != stamp) e = Held{stamp, 0};
          released += ++e.count == ref[p];
        }
      }
    }
  }
  plan.stepped_ = static_cast<int64_t>(k);
  plan.taken_ = prefix;
  plan.released_ = released;
  plan.free_after_ = free + released - prefix;
  plan.top_fits_ = k > 0 || r == 0;
  plan.coordinator_ = id_;
  plan.version_ = pool_->version();
  return plan;
}

void Coordinator::apply_step(StepPlan& plan) {
  if (plan.coordinator_ != id_) fail("plan", "comes from another coordinator");
  if (plan.applied_) fail("plan", "was applied already");
  bool stale = plan.version_ != pool_->version();
  for (size_t i = 0; i < plan.tables_.size() && !stale; ++i) {
    const BlockTable* t = plan.tables_[i];
    stale = !(plan.shapes_[i] == StepPlan::Shape{t->size(), t->tail_, t->floor_, t->pool_});
  }
  if (stale) fail("plan", "is stale: the pool or a table changed since plan_step; plan again");
  const size_t g = managers_.size();
  const size_t k = static_cast<size_t>(plan.stepped_);
  const Manager* m = managers_.data();
  // The only throw (std::bad_alloc) comes before any change.
  for (size_t req = 0; req < k; ++req) {
    const int64_t n = plan.tokens_[req];
    if (n > 0)
      for (size_t j = 0; j < g; ++j) m[j].reserve_unchecked(*plan.tables_[req * g + j], n);
  }
  plan.applied_ = true;
  for (size_t req = plan.tokens_.size(); req-- > k;)
    for (size_t j = 0; j < g; ++j) {
      BlockTable& t = *plan.tables_[req * g + j];
      if (t.load_ != 0) abort_load(t.load_);  // a preempted request's pending load ends
      if (t.is_bound()) pinned_[j] -= m[j].free_unchecked(*pool_, t);
    }
  for (size_t req = 0; req < k; ++req) {
    const int64_t n = plan.tokens_[req];
    if (n == 0) continue;  // binds nothing, as acquire(tables, 0)
    for (size_t j = 0; j < g; ++j) {
      const int64_t before = pool_->num_free();
      m[j].acquire_unchecked(*pool_, *plan.tables_[req * g + j], n);
      plan.tables_[req * g + j]->coordinator_ = id_;
      pinned_[j] += before - pool_->num_free();
    }
  }
}

}  // namespace livetail
