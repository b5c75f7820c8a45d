// The fuzz target's model of the pools and its invariants: snapshots, the checks after every
// call, the release rule's expected queues and the exact take of an acquire.
#include "fuzz_world.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

namespace livetail::fuzz {

namespace {

// Where a page whose count dropped to 0 re-enters the queue (semantics section 2): the
// retention rule puts unnamed pages at the front and named ones at the back; without it,
// every page goes to the back.
void model_release(std::deque<int32_t>& queue, int32_t page, bool named, bool retention) {
  if (retention && !named)
    queue.push_front(page);
  else
    queue.push_back(page);
}

// Conservation of one pool: free + pinned == N - 1, every count equals its holders, the
// queue holds exactly the pages of count 0, each once; the model's names are the pool's.
void check_pool(const BlockPool& pool, const std::vector<int32_t>& holders,
                const std::vector<std::optional<Name>>& names) {
  const int64_t n = pool.num_blocks();
  CHECK(pool.num_free() + pool.num_pinned() == n - 1);
  std::vector<int32_t> refs(static_cast<size_t>(n));
  pool.copy_ref_counts(refs.data());
  CHECK(refs[0] == 0 && !pool.is_cached(0));
  int64_t named = 0;
  for (int64_t p = 0; p < n; ++p) {
    named += pool.is_cached(p);
    CHECK(pool.is_cached(p) == names[static_cast<size_t>(p)].has_value());
  }
  CHECK(named == pool.num_cached());
  for (int64_t p = 1; p < n; ++p)
    CHECK(refs[static_cast<size_t>(p)] == holders[static_cast<size_t>(p)]);
  std::vector<bool> queued(static_cast<size_t>(n), false);
  for (int32_t p : copy_queue(pool)) {
    CHECK(p > 0 && p < n && !queued[static_cast<size_t>(p)]);
    queued[static_cast<size_t>(p)] = true;
    CHECK(refs[static_cast<size_t>(p)] == 0);
  }
  for (int64_t p = 1; p < n; ++p)
    CHECK(queued[static_cast<size_t>(p)] == (refs[static_cast<size_t>(p)] == 0));
}

}  // namespace

[[noreturn]] void violated(const char* file, int line, const char* what) {
  const char* slash = std::strrchr(file, '/');
  std::fprintf(stderr, "%s:%d: invariant violated: %s\n", slash ? slash + 1 : file, line, what);
  std::abort();
}

// Token i of document d: shared by every document below 24 (the machine's doc_tokens).
const std::vector<Key>& doc_keys(int doc, int64_t base) {
  static std::map<std::pair<int, int64_t>, std::vector<Key>> cache;
  auto it = cache.find({doc, base});
  if (it != cache.end()) return it->second;
  std::vector<uint32_t> tokens(kMaxTokens);
  for (int64_t i = 0; i < kMaxTokens; ++i)
    tokens[static_cast<size_t>(i)] =
        static_cast<uint32_t>(i < 24 ? i : 1000003 * static_cast<int64_t>(doc + 1) + i);
  return cache.emplace(std::pair{doc, base}, page_keys(tokens, base)).first->second;
}

std::vector<int32_t> copy_queue(const BlockPool& pool) {
  std::vector<int32_t> q(static_cast<size_t>(pool.num_free()));
  pool.copy_free_queue(q.data());
  return q;
}

Snapshot World::snapshot() const {
  Snapshot s;
  s.queue = queue();
  s.refs.resize(static_cast<size_t>(pool_.num_blocks()));
  pool_.copy_ref_counts(s.refs.data());
  for (int64_t p = 0; p < pool_.num_blocks(); ++p) s.cached.push_back(pool_.is_cached(p));
  for (const auto& r : tables_)
    for (const BlockTable& t : r)
      s.tables.push_back({{t.page_ids().begin(), t.page_ids().end()},
                          t.tail_available(),
                          t.reclaim_floor(),
                          t.num_real_pages(),
                          t.named_upto(),
                          t.block_size(),
                          t.pool(),
                          t.has_pending_load()});
  s.held = held_;
  s.num_free = pool_.num_free();
  s.num_cached = pool_.num_cached();
  if (host_) {
    s.host_queue = copy_queue(*host_);
    s.host_refs.resize(static_cast<size_t>(host_->num_blocks()));
    host_->copy_ref_counts(s.host_refs.data());
    for (int64_t p = 0; p < host_->num_blocks(); ++p) s.host_cached.push_back(host_->is_cached(p));
    s.host_offloaded = host_->pages_offloaded();
    s.host_loaded = host_->pages_loaded();
  }
  return s;
}

void World::check() const {
  const int64_t n = pool_.num_blocks();
  // Device holders: slots of every table, the engine's pages, pending offloads' copies.
  std::vector<int32_t> holders(static_cast<size_t>(n), 0);
  for (int32_t p : held_) ++holders[static_cast<size_t>(p)];
  for (const OffloadPlan& plan : offloads_) {
    CHECK(plan.state() == PlanState::pending);
    for (int32_t p : plan.device_pages()) ++holders[static_cast<size_t>(p)];
  }
  for (int r = 0; r < kRequests; ++r) {
    const auto& load = loads_[static_cast<size_t>(r)];
    for (const BlockTable& t : tables_[static_cast<size_t>(r)])
      CHECK(t.has_pending_load() == load.has_value());
    if (load) CHECK(coord_.load_state(load->plan) == PlanState::pending);
  }
  for (const OffloadPlan& plan : ended_offloads_) CHECK(plan.state() != PlanState::pending);
  for (const LoadPlan& plan : ended_loads_) CHECK(coord_.load_state(plan) != PlanState::pending);
  for (const auto& r : tables_)
    for (size_t g = 0; g < r.size(); ++g) {
      const BlockTable& t = r[g];
      const Manager& m = coord_.managers()[g];
      const int64_t B = m.block_size();
      const auto slots = t.page_ids();
      int64_t real = 0;
      for (int32_t p : slots) {
        CHECK(p >= 0 && p < n);
        if (p != 0) ++holders[static_cast<size_t>(p)], ++real;
      }
      CHECK(real == t.num_real_pages());
      if (slots.empty()) {
        CHECK(!t.is_bound() && t.tail_available() == 0 && t.reclaim_floor() == 0);
        continue;
      }
      CHECK(t.pool() == &pool_ && t.block_size() == B);
      CHECK(t.tail_available() >= 0 && t.tail_available() < B);
      CHECK(t.reclaim_floor() <= t.size());
      CHECK(t.extent() == t.size() * B - t.tail_available());
      for (int64_t s = 0; s < t.reclaim_floor(); ++s) CHECK(slots[static_cast<size_t>(s)] == 0);
      // No hole inside the window nor among the resume pages (every slot when not live).
      const int64_t W = m.sliding_window(), A = m.live_alloc_alignment();
      const int64_t out = m.kind() == GroupKind::full ? 0 : geometry::slid_out(t.extent(), W, B);
      const int64_t per = geometry::period(A, B), kept = geometry::kept_per_period(W, B, A);
      for (int64_t s = t.reclaim_floor(); s < t.size(); ++s)
        if (A == 0 || s >= out || s % per >= per - kept) CHECK(slots[static_cast<size_t>(s)] != 0);
    }
  check_pool(pool_, holders, dev_names_);
  // Each group pins the distinct pages its slots and its pending copies hold (less what
  // single-group manager calls, which the coordinator does not see, took); the engine's own
  // pages belong to no group.
  std::vector<std::set<int32_t>> pinned(groups());
  for (const auto& r : tables_)
    for (size_t g = 0; g < r.size(); ++g)
      for (int32_t p : r[g].page_ids())
        if (p != 0) pinned[g].insert(p);
  for (const OffloadPlan& plan : offloads_)
    for (int64_t e = 0; e < plan.num_pages(); ++e)
      pinned[static_cast<size_t>(plan.groups()[static_cast<size_t>(e)])].insert(
          plan.device_pages()[static_cast<size_t>(e)]);
  std::set<int32_t> engine(held_.begin(), held_.end());
  auto total = static_cast<int64_t>(engine.size());
  for (size_t g = 0; g < groups(); ++g) {
    CHECK(coord_.pinned_pages(static_cast<int64_t>(g)) + manager_net_[g] ==
          static_cast<int64_t>(pinned[g].size()));
    total += static_cast<int64_t>(pinned[g].size());
  }
  CHECK(total == pool_.num_pinned());
  if (!host_) {
    CHECK(offloads_.empty() && !any_loading());
    return;
  }
  // Host holders: pending offloads' host pages, pending loads' pins.
  std::vector<int32_t> host_holders(static_cast<size_t>(host_->num_blocks()), 0);
  for (const OffloadPlan& plan : offloads_)
    for (int32_t p : plan.host_pages()) ++host_holders[static_cast<size_t>(p)];
  for (const auto& load : loads_)
    if (load)
      for (int32_t p : load->plan.host_pages()) ++host_holders[static_cast<size_t>(p)];
  check_pool(*host_, host_holders, host_names_);
}

void World::forget_evicted() {
  for (size_t p = 0; p < dev_names_.size(); ++p)
    if (!pool_.is_cached(static_cast<int64_t>(p))) dev_names_[p].reset();
  if (host_)
    for (size_t p = 0; p < host_names_.size(); ++p)
      if (!host_->is_cached(static_cast<int64_t>(p))) host_names_[p].reset();
}

void World::expect_queue(const Snapshot& before, const std::vector<int32_t>& released) const {
  std::deque<int32_t> q(before.queue.begin(), before.queue.end());
  for (int32_t p : released)
    model_release(q, p, before.cached[static_cast<size_t>(p)], pool_.retention());
  CHECK(std::vector<int32_t>(q.begin(), q.end()) == queue());
}

void World::expect_host_queue(const Snapshot& before, const std::vector<int32_t>& releases) const {
  std::vector<int32_t> refs = before.host_refs, released;
  for (int32_t p : releases)
    if (--refs[static_cast<size_t>(p)] == 0) released.push_back(p);
  std::deque<int32_t> q(before.host_queue.begin(), before.host_queue.end());
  for (int32_t p : released) model_release(q, p, host_->is_cached(p), true);
  CHECK(std::vector<int32_t>(q.begin(), q.end()) == copy_queue(*host_));
}

void World::expect_exact_take(const Snapshot& before, int r, std::optional<size_t> only_group,
                              int64_t need) const {
  CHECK(before.num_free - pool_.num_free() == need);
  const Snapshot after = snapshot();
  std::vector<int32_t> taken;
  for (size_t i = 0; i < after.tables.size(); ++i) {
    const auto& b = before.tables[i];
    const auto& a = after.tables[i];
    const bool acted =
        static_cast<int>(i / groups()) == r && (!only_group || i % groups() == *only_group);
    if (!acted) {
      CHECK(a == b);
      continue;
    }
    CHECK(a.slots.size() >= b.slots.size());
    CHECK(std::equal(b.slots.begin(), b.slots.end(), a.slots.begin()));
    for (size_t s = b.slots.size(); s < a.slots.size(); ++s)
      if (a.slots[s] != 0) taken.push_back(a.slots[s]);
  }
  CHECK(static_cast<int64_t>(taken.size()) == need);
  CHECK(std::equal(taken.begin(), taken.end(), before.queue.begin()));
  // An allocation drops the name of every page it pops (eviction).
  for (int32_t p : taken) CHECK(!pool_.is_cached(p));
}

}  // namespace livetail::fuzz
