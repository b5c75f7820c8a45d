// Fuzz target over the C++ API: the input bytes are decoded into a small coordinator and a
// sequence of calls (native/fuzz/README.md gives the encoding); after every call the
// semantics' invariants are checked and any violation aborts with the reason.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "livetail/coordinator.h"

namespace {

using namespace livetail;

constexpr int kRequests = 3;
constexpr int64_t kMaxTokens = 2048;  // per table: keeps the documents' keys precomputed
constexpr int64_t kPageSizes[] = {1, 2, 3, 4, 8, 16};

// Where a page whose count dropped to 0 re-enters the queue (semantics section 2): the
// retention rule puts unnamed pages at the front and named ones at the back; without it,
// every page goes to the back.
void model_release(std::deque<int32_t>& queue, int32_t page, bool named, bool retention) {
  if (retention && !named)
    queue.push_front(page);
  else
    queue.push_back(page);
}

[[noreturn]] void violated(int line, const char* what) {
  std::fprintf(stderr, "fuzz_api.cpp:%d: invariant violated: %s\n", line, what);
  std::abort();
}
#define CHECK(cond)                         \
  do {                                      \
    if (!(cond)) violated(__LINE__, #cond); \
  } while (0)

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ == end_; }
  uint8_t byte() { return p_ == end_ ? 0 : *p_++; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

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

struct TableState {
  std::vector<int32_t> slots;
  int64_t tail, floor, real, named_upto, block_size;
  const BlockPool* pool;
  bool loading;
  bool operator==(const TableState&) const = default;
};

struct Snapshot {
  std::vector<int32_t> queue, refs;
  std::vector<bool> cached;
  std::vector<TableState> tables;  // request-major
  std::vector<int32_t> held;
  int64_t num_free, num_cached;
  // The host tier (empty without one): queue, counts, names, counters.
  std::vector<int32_t> host_queue, host_refs;
  std::vector<bool> host_cached;
  int64_t host_offloaded = 0, host_loaded = 0;
  bool operator==(const Snapshot&) const = default;
};

// A page's name (semantics section 8): (group index, key).
using Name = std::pair<int32_t, Key>;

// The pages a pool gives back, in the order of its rule: pages[n-1] first (BlockPool::free).
std::vector<int32_t> reversed(std::span<const int32_t> pages) {
  return {pages.rbegin(), pages.rend()};
}

std::vector<int32_t> copy_queue(const BlockPool& pool) {
  std::vector<int32_t> q(static_cast<size_t>(pool.num_free()));
  pool.copy_free_queue(q.data());
  return q;
}

// A claim's pending load (semantics section 10) and the document its names come from.
struct Load {
  LoadPlan plan;
  int doc;
};

class World {
 public:
  // host_blocks: the host pool's size (semantics section 10), 0 for a coordinator without.
  World(const std::vector<GroupSpec>& specs, int64_t num_blocks, bool retention,
        int64_t host_blocks)
      : pool_(num_blocks, retention),
        other_(num_blocks),
        host_(host_blocks > 0 ? std::make_unique<HostPool>(host_blocks) : nullptr),
        coord_(specs, pool_, host_.get()),
        other_coord_(specs, other_, &other_host_),
        no_host_(specs, other_),
        dev_names_(static_cast<size_t>(num_blocks)),
        host_names_(static_cast<size_t>(host_blocks)) {
    for (auto& r : tables_) r.resize(static_cast<size_t>(coord_.num_groups()));
    scratch_.resize(static_cast<size_t>(coord_.num_groups()));
    manager_net_.assign(static_cast<size_t>(coord_.num_groups()), 0);
  }

  void step(Input& in);
  void check() const;

 private:
  size_t groups() const { return static_cast<size_t>(coord_.num_groups()); }
  std::vector<BlockTable*> request(int r) {
    std::vector<BlockTable*> ts;
    for (BlockTable& t : tables_[static_cast<size_t>(r)]) ts.push_back(&t);
    return ts;
  }
  std::vector<BlockTable*> scratch() {
    std::vector<BlockTable*> ts;
    for (BlockTable& t : scratch_) ts.push_back(&t);
    return ts;
  }
  int64_t min_extent(int r) const {
    int64_t e = kMaxTokens;
    for (const BlockTable& t : tables_[static_cast<size_t>(r)]) e = std::min(e, t.extent());
    return e;
  }
  int64_t max_extent(int r) const {
    int64_t e = 0;
    for (const BlockTable& t : tables_[static_cast<size_t>(r)]) e = std::max(e, t.extent());
    return e;
  }
  // Request r's tables cover different extents (a single-group call grew or freed one):
  // every coordinator call taking them throws and changes nothing.
  bool split(int r) const { return min_extent(r) != max_extent(r); }
  bool any_split() const {
    for (int r = 0; r < kRequests; ++r)
      if (split(r)) return true;
    return false;
  }
  // A token count from one byte: mostly small, sometimes lcm multiples; capped per table.
  int64_t tokens(uint8_t b, int r) const {
    int64_t n = b < 192 ? b % 64 : (b - 191) * coord_.lcm_block_size();
    return std::min(n, kMaxTokens - max_extent(r));
  }
  // A frontier at or below every table's extent, mostly at it.
  int64_t frontier(uint8_t b, int r) const {
    const int64_t e = min_extent(r);
    return b < 128 ? e : std::max<int64_t>(0, e - (b % 16));
  }
  std::vector<int32_t> queue() const { return copy_queue(pool_); }
  Snapshot snapshot() const;
  // A call that raised std::invalid_argument or reported failure changed nothing.
  void expect_unchanged(const Snapshot& before) const { CHECK(snapshot() == before); }
  // Pages released one by one (in that order) joined the queue by the release rule.
  void expect_queue(const Snapshot& before, const std::vector<int32_t>& released) const;
  // The same for the host pool (always with the retention rule), given every release of a
  // reference in order: a page re-enters when its last one goes.
  void expect_host_queue(const Snapshot& before, const std::vector<int32_t>& releases) const;
  // The new real slots of a successful acquire hold the queue's front, in ascending slot
  // order and group order, and nothing else changed.
  void expect_exact_take(const Snapshot& before, int r, std::optional<size_t> only_group,
                         int64_t need) const;
  // Names the pools dropped (eviction) leave the model too.
  void forget_evicted();
  bool loading(int r) const { return loads_[static_cast<size_t>(r)].has_value(); }
  bool any_loading() const {
    for (int r = 0; r < kRequests; ++r)
      if (loading(r)) return true;
    return false;
  }
  // The key group g's slot j is named by in document doc.
  const Key& slot_key(int doc, size_t g, int64_t j) const {
    const int64_t k = coord_.managers()[g].block_size() / coord_.base_block_size();
    return doc_keys(doc, coord_.base_block_size())[static_cast<size_t>((j + 1) * k - 1)];
  }
  // Slots behind a boundary that group g needs to resume there (section 8); -1 for full.
  int64_t resume(size_t g) const {
    const Manager& m = coord_.managers()[g];
    if (m.kind() == GroupKind::full) return -1;
    if (m.kind() == GroupKind::state) return 1;
    return geometry::resume_pages(m.sliding_window(), m.block_size());
  }
  // Request r's pending load ended with its free: the coordinator aborted it.
  void end_freed_load(int r);
  void keep_load(int r, LoadPlan plan, int doc);

  void acquire(int r, int64_t n);
  void admit(int r, int64_t first, int64_t extra, bool reclaim_between);
  void reclaim(int r, int64_t f);
  void free_request(int r);
  void group_op(int r, size_t g, uint8_t what, uint8_t arg);
  void cache(int r, int doc, int64_t n, int64_t fewer_keys);
  void match_and_claim(int r, int doc, int64_t n, bool keep, bool complete);
  void claim_saved(int r);
  void decode_step();
  void pool_allocate(int64_t k);
  void pool_free(uint8_t a, uint8_t b);
  void bad_call(int r, uint8_t what);
  void plan_and_apply(uint8_t a, uint8_t b);
  void offload(int r, int64_t n, uint8_t end);
  void end_offload(size_t i, bool complete);
  void evict(int64_t k);
  void complete_load(int r, bool twice);
  void host_misuse(int r, uint8_t what);

  template <class F>
  void expect_throw(F&& call) {
    const Snapshot before = snapshot();
    bool thrown = false;
    try {
      call();
    } catch (const std::invalid_argument&) {
      thrown = true;
    }
    CHECK(thrown);
    expect_unchanged(before);
  }

  BlockPool pool_;
  BlockPool other_;  // tables bound elsewhere are rejected
  HostPool other_host_{2};
  std::unique_ptr<HostPool> host_;
  Coordinator coord_;
  Coordinator other_coord_;  // its plans are foreign to coord_
  Coordinator no_host_;      // host calls throw
  std::array<std::vector<BlockTable>, kRequests> tables_;
  std::vector<BlockTable> scratch_;   // stays fresh: other_coord_'s and no_host_'s tables
  std::vector<int32_t> held_;         // pages the engine took straight from the pool
  std::vector<int64_t> manager_net_;  // per group: pages single-group calls took less gave back
  std::optional<PrefixMatch> saved_;
  int saved_doc_ = 0;
  // The names the pools carry, as the model knows them: set by naming, offload and load.
  std::vector<std::optional<Name>> dev_names_, host_names_;
  std::vector<OffloadPlan> offloads_;                 // pending, oldest first
  std::deque<OffloadPlan> ended_offloads_;            // a few completed or aborted ones
  std::array<std::optional<Load>, kRequests> loads_;  // pending loads, one per request at most
  std::deque<LoadPlan> ended_loads_;                  // a few completed or aborted ones
};

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

void World::acquire(int r, int64_t n) {
  auto ts = request(r);
  if (split(r)) {
    expect_throw([&] { static_cast<void>(coord_.blocks_needed_for(ts, n)); });
    expect_throw([&] { coord_.acquire(ts, n); });
    return;
  }
  const int64_t need = coord_.blocks_needed_for(ts, n);
  int64_t manager_sum = 0;
  for (size_t g = 0; g < groups(); ++g)
    manager_sum += coord_.managers()[g].blocks_needed_for(*ts[g], n);
  CHECK(need == manager_sum);
  const Snapshot before = snapshot();
  if (coord_.acquire(ts, n)) {
    expect_exact_take(before, r, std::nullopt, need);
  } else {
    CHECK(need > before.num_free);  // a shortfall, and only then a failure
    expect_unchanged(before);
  }
}

void World::admit(int r, int64_t first, int64_t extra, bool reclaim_between) {
  auto ts = request(r);
  if (split(r)) {
    expect_throw([&] { static_cast<void>(coord_.blocks_needed_for_sequential(ts, first, extra)); });
    return;
  }
  const int64_t charge = coord_.blocks_needed_for_sequential(ts, first, extra);
  const int64_t chunk = coord_.blocks_needed_for(ts, first);
  CHECK(charge >= chunk);                 // the decode hold-back is never negative
  if (charge > pool_.num_free()) return;  // deferred
  const int64_t pinned0 = pool_.num_pinned();
  const Snapshot before = snapshot();
  CHECK(coord_.acquire(ts, first));
  expect_exact_take(before, r, std::nullopt, chunk);
  forget_evicted();
  check();
  int64_t peak = pool_.num_pinned() - pinned0;
  if (reclaim_between) reclaim(r, min_extent(r));
  const int64_t hold = coord_.blocks_needed_for(ts, extra);
  CHECK(hold == charge - chunk);  // exactly what the decode acquire takes
  const Snapshot mid = snapshot();
  CHECK(coord_.acquire(ts, extra));
  expect_exact_take(mid, r, std::nullopt, hold);
  peak = std::max(peak, pool_.num_pinned() - pinned0);
  CHECK(peak <= charge);
}

void World::reclaim(int r, int64_t f) {
  auto ts = request(r);
  if (loading(r) || split(r)) {  // reclaimed only once the load ends (semantics section 10)
    expect_throw([&] { coord_.reclaim_expired(ts, f); });
    return;
  }
  int64_t predicted = 0;
  for (size_t g = 0; g < groups(); ++g)
    predicted += coord_.managers()[g].blocks_reclaimable_at(*ts[g], f);
  const Snapshot before = snapshot();
  std::vector<int32_t> released;  // groups in order, each band in ascending slot order
  for (size_t g = 0; g < groups(); ++g) {
    const Manager& m = coord_.managers()[g];
    if (m.kind() == GroupKind::full) continue;
    const auto s = ts[g]->page_ids();
    const int64_t b = geometry::reclaim_bound(f, ts[g]->size(), m.sliding_window(), m.block_size());
    for (int64_t i = ts[g]->reclaim_floor(); i < b; ++i) {
      const int32_t p = s[static_cast<size_t>(i)];
      if (p != 0 && pool_.ref_count(p) == 1) released.push_back(p);
    }
  }
  CHECK(coord_.reclaim_expired(ts, f) == predicted);
  CHECK(static_cast<int64_t>(released.size()) == predicted);
  expect_queue(before, released);
  for (size_t g = 0; g < groups(); ++g) {
    const Manager& m = coord_.managers()[g];
    if (m.kind() == GroupKind::full) continue;
    const int64_t b = geometry::reclaim_bound(f, ts[g]->size(), m.sliding_window(), m.block_size());
    for (int64_t i = 0; i < b; ++i) CHECK(ts[g]->page_ids()[static_cast<size_t>(i)] == 0);
    CHECK(ts[g]->reclaim_floor() ==
              std::max(before.tables[static_cast<size_t>(r) * groups() + g].floor, b) ||
          ts[g]->size() == 0);
  }
}

void World::free_request(int r) {
  auto ts = request(r);
  if (split(r)) {
    expect_throw([&] { coord_.free(ts); });
    return;
  }
  const Snapshot before = snapshot();
  std::vector<int32_t> released;  // groups in order, each table last slot first
  for (BlockTable* t : ts) {
    const auto s = t->page_ids();
    for (size_t i = s.size(); i-- > 0;)
      if (s[i] != 0 && pool_.ref_count(s[i]) == 1) released.push_back(s[i]);
  }
  CHECK(coord_.free(ts) == static_cast<int64_t>(released.size()));
  for (BlockTable* t : ts) CHECK(t->is_fresh() && t->tail_available() == 0 && t->named_upto() == 0);
  expect_queue(before, released);
  // A pending load ends with its request: its host pins drop, the plan last first.
  const auto& load = loads_[static_cast<size_t>(r)];
  if (host_)
    expect_host_queue(before, load ? reversed(load->plan.host_pages()) : std::vector<int32_t>{});
  end_freed_load(r);
}

void World::end_freed_load(int r) {
  auto& load = loads_[static_cast<size_t>(r)];
  if (!load) return;
  CHECK(coord_.load_state(load->plan) == PlanState::aborted);
  ended_loads_.push_back(std::move(load->plan));
  if (ended_loads_.size() > 4) ended_loads_.pop_front();
  load.reset();
}

void World::keep_load(int r, LoadPlan plan, int doc) {
  CHECK(!loading(r));  // a claim needs fresh tables: their earlier load ended with the free
  CHECK(coord_.load_state(plan) == PlanState::pending);
  loads_[static_cast<size_t>(r)] = Load{std::move(plan), doc};
}

// Single-group calls: the only path to tables of one request with different extents.
void World::group_op(int r, size_t g, uint8_t what, uint8_t arg) {
  BlockTable& t = tables_[static_cast<size_t>(r)][g];
  const Manager& m = coord_.managers()[g];
  const Snapshot before = snapshot();
  if (what % 3 != 0 && loading(r)) {  // only the coordinator's free ends a load
    if (what % 3 == 1)
      expect_throw([&] { m.reclaim_expired(pool_, t, t.extent()); });
    else
      expect_throw([&] { m.free(pool_, t); });
    return;
  }
  switch (what % 3) {
    case 0: {
      const int64_t n = std::min(tokens(arg, r), kMaxTokens - t.extent());
      const int64_t need = m.blocks_needed_for(t, n);
      if (m.acquire(pool_, t, n)) {
        expect_exact_take(before, r, g, need);
        manager_net_[g] += need;
      } else {
        CHECK(need > before.num_free);
        expect_unchanged(before);
      }
      break;
    }
    case 1: {
      const int64_t f = arg < 128 ? t.extent() : std::max<int64_t>(0, t.extent() - arg % 16);
      const int64_t predicted = m.blocks_reclaimable_at(t, f);
      CHECK(m.reclaim_expired(pool_, t, f) == predicted);
      manager_net_[g] -= predicted;
      break;
    }
    default: {
      int64_t last = 0;
      for (int32_t p : t.page_ids()) last += p != 0 && pool_.ref_count(p) == 1;
      CHECK(m.free(pool_, t) == last);
      manager_net_[g] -= last;
      CHECK(t.is_fresh());
    }
  }
}

void World::cache(int r, int doc, int64_t n, int64_t fewer_keys) {
  auto ts = request(r);
  const int64_t base = coord_.base_block_size();
  const auto& all = doc_keys(doc, base);
  const int64_t nkeys = std::max<int64_t>(0, n / base - fewer_keys);
  const std::span<const Key> keys(all.data(), static_cast<size_t>(nkeys));
  if (split(r)) {
    expect_throw([&] { coord_.cache_full_blocks(ts, keys, n); });
    return;
  }
  Snapshot before = snapshot();
  const int64_t named = coord_.cache_full_blocks(ts, keys, n);
  CHECK(pool_.num_cached() - before.num_cached == named);
  // The pages newly named carry their slot's key.
  int64_t seen = 0;
  for (size_t g = 0; g < groups(); ++g) {
    const auto slots = ts[g]->page_ids();
    for (size_t j = 0; j < slots.size(); ++j) {
      const int32_t p = slots[j];
      if (p == 0 || before.cached[static_cast<size_t>(p)] || !pool_.is_cached(p)) continue;
      CHECK(!dev_names_[static_cast<size_t>(p)]);
      dev_names_[static_cast<size_t>(p)] =
          Name{static_cast<int32_t>(g), slot_key(doc, g, static_cast<int64_t>(j))};
      ++seen;
    }
  }
  CHECK(seen == named);
  // A page whose load is pending holds no content yet: it takes its name at complete_load.
  for (const auto& load : loads_)
    if (load)
      for (int64_t e = 0; e < load->plan.num_pages(); ++e)
        CHECK(!pool_.is_cached(load->plan.device_pages()[static_cast<size_t>(e)]));
  // Naming moves no page: only the names and the tables' naming cursors changed.
  Snapshot after = snapshot();
  for (auto* s : {&before, &after}) {
    s->cached.clear();
    s->num_cached = 0;
    for (auto& t : s->tables) t.named_upto = 0;
  }
  CHECK(after == before);
}

void World::match_and_claim(int r, int doc, int64_t n, bool keep, bool complete) {
  const int64_t base = coord_.base_block_size();
  const auto& all = doc_keys(doc, base);
  const std::span<const Key> keys(all.data(), static_cast<size_t>(n / base));
  const Snapshot before = snapshot();
  PrefixMatch match = coord_.match_prefix(keys);
  const int64_t consumed = coord_.blocks_consumed_by_claim(match);
  expect_unchanged(before);  // read-only
  const int64_t T = match.num_tokens(), L = coord_.lcm_block_size();
  CHECK(T >= 0 && T % L == 0 && T <= n / base * base);
  CHECK(match.num_groups() == coord_.num_groups());
  // A slot is present when a device or host page carries its name (semantics section 10).
  std::set<Name> on_device, on_host;
  for (const auto& name : dev_names_)
    if (name) on_device.insert(*name);
  for (const auto& name : host_names_)
    if (name) on_host.insert(*name);
  auto present = [&](size_t g, int64_t j) {
    const Name name{static_cast<int32_t>(g), slot_key(doc, g, j)};
    return on_device.contains(name) || on_host.contains(name);
  };
  // T is the greatest supported lcm multiple: no boundary above it (up to the keys) is.
  std::vector<int64_t> prefix(groups(), 0);  // a full group's longest present prefix
  const int64_t top = static_cast<int64_t>(keys.size()) * base / L;
  for (size_t g = 0; g < groups(); ++g)
    if (resume(g) < 0)
      while (prefix[g] < top * L / coord_.managers()[g].block_size() && present(g, prefix[g]))
        ++prefix[g];
  for (int64_t t = T / L + 1; t <= top; ++t) {
    bool supported = true;
    for (size_t g = 0; g < groups() && supported; ++g) {
      const int64_t b = t * L / coord_.managers()[g].block_size(), R = resume(g);
      if (R < 0) supported = b <= prefix[g];
      for (int64_t j = std::max<int64_t>(0, b - R); R >= 0 && j < b && supported; ++j)
        supported = present(g, j);
    }
    CHECK(!supported);
  }
  int64_t free_matched = 0, served = 0;
  for (size_t g = 0; g < groups(); ++g) {
    const auto pages = match.pages(static_cast<int64_t>(g));
    const auto host_pages = match.host_pages(static_cast<int64_t>(g));
    const int64_t b = T / coord_.managers()[g].block_size();
    CHECK(static_cast<int64_t>(pages.size()) == b && static_cast<int64_t>(host_pages.size()) == b);
    const int64_t R = resume(g) < 0 ? b : resume(g);
    for (int64_t j = 0; j < b; ++j) {
      const int32_t p = pages[static_cast<size_t>(j)], hp = host_pages[static_cast<size_t>(j)];
      // Real exactly where the group needs it, from one tier, the device preferred.
      CHECK(((p != 0) || (hp != 0)) == (j >= b - R) && !(p != 0 && hp != 0));
      const Name name{static_cast<int32_t>(g), slot_key(doc, g, j)};
      if (p != 0) {
        CHECK(dev_names_[static_cast<size_t>(p)] == name);
        free_matched += pool_.ref_count(p) == 0;
      }
      if (hp != 0) {
        CHECK(host_ && host_names_[static_cast<size_t>(hp)] == name && !on_device.contains(name));
        ++served;
      }
    }
  }
  CHECK(match.num_host_pages() == served);
  CHECK(consumed == free_matched + served);  // one fresh device page per host-served slot
  auto ts = request(r);
  bool fresh = true;
  for (BlockTable* t : ts) fresh &= t->is_fresh();
  if (!fresh || consumed > before.num_free) {  // a claim with loads is all-or-nothing
    CHECK(!fresh || served > 0);  // device pages alone are free or in use: always claimable
    expect_throw([&] { static_cast<void>(coord_.claim(ts, match)); });
  } else {
    std::optional<LoadPlan> plan = coord_.claim(ts, match);
    CHECK(before.num_free - pool_.num_free() == consumed);
    CHECK(plan.has_value() == (served > 0) && (!plan || plan->num_pages() == served));
    // The queue lost the matched free pages, then its front: one page per load.
    std::vector<int32_t> rest;
    for (int32_t p : before.queue) {
      bool matched = false;
      for (size_t g = 0; g < groups(); ++g)
        matched |= std::ranges::find(match.pages(static_cast<int64_t>(g)), p) !=
                   match.pages(static_cast<int64_t>(g)).end();
      if (!matched) rest.push_back(p);
    }
    CHECK(static_cast<int64_t>(rest.size()) == before.num_free - free_matched);
    const std::vector<int32_t> after = queue();
    CHECK(std::equal(rest.begin() + served, rest.end(), after.begin(), after.end()));
    size_t e = 0;  // the plan's entries, group then slot order
    for (size_t g = 0; g < groups(); ++g) {
      const auto pages = match.pages(static_cast<int64_t>(g));
      const auto host_pages = match.host_pages(static_cast<int64_t>(g));
      const BlockTable& t = *ts[g];
      const int64_t b = static_cast<int64_t>(pages.size());
      CHECK(t.size() == b && t.tail_available() == 0);
      const int64_t floor = resume(g) < 0 ? 0 : std::max<int64_t>(0, b - resume(g));
      CHECK(t.reclaim_floor() == (b == 0 ? 0 : floor));
      for (int64_t j = 0; j < b; ++j) {
        const int32_t p = pages[static_cast<size_t>(j)], hp = host_pages[static_cast<size_t>(j)];
        const int32_t slot = t.page_ids()[static_cast<size_t>(j)];
        if (hp == 0) {
          CHECK(slot == p);
          if (p != 0) CHECK(pool_.ref_count(p) == before.refs[static_cast<size_t>(p)] + 1);
          continue;
        }
        // A loaded page: a fresh device page in a real slot, the queue's next one.
        CHECK(plan && e < static_cast<size_t>(plan->num_pages()));
        CHECK(plan->groups()[e] == static_cast<int32_t>(g) && plan->slots()[e] == j);
        CHECK(plan->host_pages()[e] == hp && plan->device_pages()[e] == slot && slot != 0);
        CHECK(slot == rest[e] && pool_.ref_count(slot) == 1 && !pool_.is_cached(slot));
        CHECK(host_->ref_count(hp) == before.host_refs[static_cast<size_t>(hp)] + 1);
        ++e;
      }
    }
    CHECK(!plan || e == static_cast<size_t>(plan->num_pages()));
    if (plan) {
      keep_load(r, std::move(*plan), doc);
      forget_evicted();
      check();
      if (complete) complete_load(r, false);
    }
  }
  if (keep) {
    saved_ = std::move(match);
    saved_doc_ = doc;
  }
}

// A match kept across other calls: valid, stale (an allocation evicted a matched page) or
// claimed into tables that are no longer fresh. Either it succeeds exactly or changes nothing.
void World::claim_saved(int r) {
  if (!saved_) return;
  auto ts = request(r);
  const Snapshot before = snapshot();
  int64_t consumed = -1;
  try {
    consumed = coord_.blocks_consumed_by_claim(*saved_);
  } catch (const std::invalid_argument&) {
    expect_unchanged(before);
  }
  std::optional<LoadPlan> plan;
  try {
    plan = coord_.claim(ts, *saved_);
  } catch (const std::invalid_argument&) {
    expect_unchanged(before);
    return;
  }
  CHECK(consumed >= 0);  // a claim succeeds only where the consumed query does
  CHECK(before.num_free - pool_.num_free() == consumed);
  CHECK(plan.has_value() == (saved_->num_host_pages() > 0 && saved_->num_tokens() > 0));
  if (plan) keep_load(r, std::move(*plan), saved_doc_);
}

void World::decode_step() {
  std::vector<BlockTable*> ts;
  const bool refused = any_loading();  // a table with a pending load is not reclaimed
  std::vector<int64_t> fronts;         // the new token included: the reclaim runs after the acquire
  for (int r = 0; r < kRequests; ++r) {
    if (max_extent(r) >= kMaxTokens) return;  // keeps every table under the key limit
    for (BlockTable* t : request(r)) ts.push_back(t);
    fronts.push_back(min_extent(r) + 1);
  }
  if (refused || any_split()) {
    expect_throw([&] { coord_.decode_step(ts, fronts); });
    return;
  }
  const Snapshot before = snapshot();
  std::vector<int64_t> extents;
  for (BlockTable* t : ts) extents.push_back(t->extent());
  const DecodeResult res = coord_.decode_step(ts, fronts);
  CHECK(res.stepped >= 0 && res.stepped <= kRequests && res.reclaimed >= 0);
  const Snapshot after = snapshot();
  const auto done = static_cast<size_t>(res.stepped) * groups();
  for (size_t i = 0; i < done; ++i) CHECK(ts[i]->extent() == extents[i] + 1);
  for (size_t i = done; i < ts.size(); ++i)
    CHECK(after.tables[i] == before.tables[i]);  // the short request and every later one
  if (res.stepped < kRequests) {                 // it stopped at a real shortfall
    int64_t need = 0;
    for (size_t g = 0; g < groups(); ++g)
      need += coord_.managers()[g].blocks_needed_for(*ts[done + g], 1);
    CHECK(need > pool_.num_free());
  }
}

void World::pool_allocate(int64_t k) {
  const Snapshot before = snapshot();
  std::vector<int32_t> out(static_cast<size_t>(k));
  if (pool_.allocate(k, out.data())) {
    CHECK(std::equal(out.begin(), out.end(), before.queue.begin()));
    for (int32_t p : out) CHECK(pool_.ref_count(p) == 1 && !pool_.is_cached(p));
    held_.insert(held_.end(), out.begin(), out.end());
  } else {
    CHECK(k > before.num_free);
    expect_unchanged(before);
  }
}

void World::pool_free(uint8_t a, uint8_t b) {
  if (held_.empty()) return;
  const size_t i = a % held_.size();
  const size_t len = 1 + b % (held_.size() - i);
  const std::vector<int32_t> batch(held_.begin() + static_cast<std::ptrdiff_t>(i),
                                   held_.begin() + static_cast<std::ptrdiff_t>(i + len));
  const Snapshot before = snapshot();
  CHECK(pool_.free(batch) == static_cast<int64_t>(len));
  held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i),
              held_.begin() + static_cast<std::ptrdiff_t>(i + len));
  expect_queue(before, std::vector<int32_t>(batch.rbegin(), batch.rend()));  // pn first
}

void World::bad_call(int r, uint8_t what) {
  auto ts = request(r);
  BlockTable& t0 = *ts[0];
  const Manager& m0 = coord_.managers()[0];
  const int64_t past = max_extent(r) + 1;
  const int64_t big = int64_t{1} << 40;
  switch (what % 14) {
    case 0:
      expect_throw([&] { coord_.acquire(ts, -1); });
      break;
    case 1:
      expect_throw([&] { coord_.acquire(ts, big); });
      break;
    case 2:
      expect_throw([&] { coord_.reclaim_expired(ts, past); });
      break;
    case 3:
      expect_throw([&] { coord_.reclaim_expired(ts, -1); });
      break;
    case 4:
      expect_throw([&] { coord_.blocks_needed_for_sequential(ts, 1, -1); });
      break;
    case 5:
      expect_throw(
          [&] { coord_.cache_full_blocks(ts, doc_keys(0, coord_.base_block_size()), past); });
      break;
    case 6: {
      std::vector<Key> dup(2, doc_keys(0, coord_.base_block_size())[0]);
      expect_throw([&] { static_cast<void>(coord_.match_prefix(dup)); });
      break;
    }
    case 7: {
      std::vector<BlockTable*> fewer(ts.begin(), ts.end() - 1);
      expect_throw([&] { coord_.acquire(fewer, 1); });
      break;
    }
    case 8:
      if (ts.size() >= 2) {
        std::vector<BlockTable*> dup(ts);
        dup.back() = dup.front();
        expect_throw([&] { coord_.free(dup); });
      }
      break;
    case 9:
      if (t0.is_bound()) expect_throw([&] { m0.acquire(other_, t0, 1); });
      break;
    case 10:
      expect_throw([&] { pool_.allocate(-1, nullptr); });
      break;
    case 11: {
      const int32_t none[] = {0};
      expect_throw([&] { pool_.free(none); });
      break;
    }
    case 12:  // one release more than the page has references: the whole batch is refused
      if (!held_.empty()) {
        const std::vector<int32_t> twice{held_.front(), held_.back(), held_.front()};
        expect_throw([&] { pool_.free(twice); });
      }
      break;
    default:
      expect_throw([&] { m0.reclaim_expired(pool_, t0, t0.extent() + 1); });
  }
}

// Pages whose every reference is held by the tables of requests order[from..]: what
// preempting them puts back in the queue (semantics section 9).
int64_t released_by(const BlockPool& pool, const std::vector<std::vector<BlockTable*>>& reqs,
                    size_t from) {
  std::map<int32_t, int32_t> held;
  for (size_t q = from; q < reqs.size(); ++q)
    for (const BlockTable* t : reqs[q])
      for (int32_t p : t->page_ids())
        if (p != 0) ++held[p];
  int64_t n = 0;
  for (const auto& [p, count] : held) n += count == pool.ref_count(p);
  return n;
}

void World::plan_and_apply(uint8_t a, uint8_t b) {
  std::vector<std::vector<BlockTable*>> reqs;  // priority order: a rotation of the requests
  std::vector<BlockTable*> ts;
  std::vector<int64_t> tokens, needs;
  for (int i = 0; i < kRequests; ++i) {
    const int r = (i + a) % kRequests;
    const int64_t choice[] = {0, 1, 9, 2 * coord_.lcm_block_size()};
    const int64_t n = std::min(choice[(b >> (2 * i)) & 3], kMaxTokens - max_extent(r));
    reqs.push_back(request(r));
    ts.insert(ts.end(), reqs.back().begin(), reqs.back().end());
    tokens.push_back(n);
    needs.push_back(split(r) ? 0 : coord_.blocks_needed_for(reqs.back(), n));
  }
  if (any_split()) {
    expect_throw([&] { static_cast<void>(coord_.plan_step(ts, tokens)); });
    return;
  }
  const Snapshot before = snapshot();
  StepPlan plan = coord_.plan_step(ts, tokens);
  expect_unchanged(before);  // read-only
  const auto k = static_cast<size_t>(plan.stepped());
  CHECK(plan.num_requests() == kRequests && k <= reqs.size());
  int64_t taken = 0;
  for (size_t q = 0; q < k; ++q) taken += needs[q];
  const int64_t released = released_by(pool_, reqs, k);
  CHECK(plan.pages_taken() == taken && plan.pages_released() == released);
  CHECK(taken <= before.num_free + released);  // the stepped prefix fits ...
  if (k < reqs.size())                         // ... and is the longest that does
    CHECK(taken + needs[k] > before.num_free + released_by(pool_, reqs, k + 1));
  CHECK(plan.free_after() == before.num_free + released - taken);
  CHECK(plan.top_fits() == (k > 0));
  if ((a & 0x80) && pool_.num_free() > 0) {  // a change since plan_step makes the plan stale
    pool_allocate(1);
    forget_evicted();
    check();
    expect_throw([&] { coord_.apply_step(plan); });
    return;
  }
  std::vector<int64_t> extents;
  for (const BlockTable* t : ts) extents.push_back(t->extent());
  const Snapshot applied = snapshot();
  coord_.apply_step(plan);
  CHECK(plan.applied() && pool_.num_free() == plan.free_after());
  // Preempted requests' loads ended with their free (lowest priority first).
  std::vector<int32_t> unpinned;
  for (size_t q = reqs.size(); q-- > k;) {
    const int r = (static_cast<int>(q) + a) % kRequests;
    const auto& load = loads_[static_cast<size_t>(r)];
    if (load)
      for (int32_t p : reversed(load->plan.host_pages())) unpinned.push_back(p);
    end_freed_load(r);
  }
  if (host_) expect_host_queue(applied, unpinned);
  for (size_t i = 0; i < ts.size(); ++i) {
    const size_t q = i / groups();
    if (q < k)
      CHECK(ts[i]->extent() == extents[i] + tokens[q]);
    else
      CHECK(ts[i]->is_fresh());
  }
  expect_throw([&] { coord_.apply_step(plan); });  // a plan applies once
}

// --- host tier (semantics section 10) ---------------------------------------------------

// plan_offload of request r's tables up to n tokens; `end` completes (1) or aborts (2) it at
// once, else it stays pending for a later call.
void World::offload(int r, int64_t n, uint8_t end) {
  auto ts = request(r);
  if (!host_) {
    expect_throw([&] { static_cast<void>(coord_.plan_offload(ts, n)); });
    return;
  }
  if (offloads_.size() >= 8) return;  // enough copies in flight
  if (split(r)) {
    expect_throw([&] { static_cast<void>(coord_.plan_offload(ts, n)); });
    return;
  }
  // Reachable pages up to n, computed from the semantics: a full group's named slots below
  // n / B; a sliding or state group's named slots in [b - R, b) for every lcm multiple
  // b * B <= n. Planned: those whose name the host lacks, group then slot order.
  std::set<Name> on_host;
  for (const auto& name : host_names_)
    if (name) on_host.insert(*name);
  std::vector<std::array<int32_t, 3>> want;  // group, slot, device page
  for (size_t g = 0; g < groups(); ++g) {
    const int64_t B = coord_.managers()[g].block_size(), R = resume(g);
    std::set<int64_t> slots;
    if (R < 0)
      for (int64_t j = 0; j < n / B; ++j) slots.insert(j);
    else
      for (int64_t T = coord_.lcm_block_size(); T <= n; T += coord_.lcm_block_size())
        for (int64_t j = std::max<int64_t>(0, T / B - R); j < T / B; ++j) slots.insert(j);
    for (int64_t j : slots) {
      const int32_t p = ts[g]->page_ids()[static_cast<size_t>(j)];
      const auto& name = dev_names_[static_cast<size_t>(p)];
      if (p != 0 && name && !on_host.contains(*name))
        want.push_back({static_cast<int32_t>(g), static_cast<int32_t>(j), p});
    }
  }
  const Snapshot before = snapshot();
  std::optional<OffloadPlan> plan = coord_.plan_offload(ts, n);
  const auto k = static_cast<int64_t>(want.size());
  if (!plan) {  // all or nothing: the host pool is short
    CHECK(k > static_cast<int64_t>(before.host_queue.size()));
    expect_unchanged(before);
    return;
  }
  CHECK(plan->state() == PlanState::pending && plan->num_pages() == k);
  for (size_t e = 0; e < want.size(); ++e) {
    CHECK(plan->groups()[e] == want[e][0] && plan->slots()[e] == want[e][1]);
    CHECK(plan->device_pages()[e] == want[e][2]);
    // One more device reference per copy; the host pages are the host queue's front.
    CHECK(pool_.ref_count(want[e][2]) == before.refs[static_cast<size_t>(want[e][2])] + 1);
    const int32_t hp = plan->host_pages()[e];
    CHECK(hp == before.host_queue[e] && host_->ref_count(hp) == 1 && !host_->is_cached(hp));
  }
  CHECK(queue() == before.queue &&
        before.host_queue.size() - copy_queue(*host_).size() == want.size());
  offloads_.push_back(std::move(*plan));
  forget_evicted();  // the host allocation may evict host names
  check();
  if (end == 1 || end == 2) end_offload(offloads_.size() - 1, end == 1);
}

// Completes or aborts pending plan i.
void World::end_offload(size_t i, bool complete) {
  OffloadPlan& plan = offloads_[i];
  const Snapshot before = snapshot();
  if (complete)
    coord_.complete_offload(plan);
  else
    coord_.abort_offload(plan);
  CHECK(plan.state() == (complete ? PlanState::completed : PlanState::aborted));
  // The device references drop, last entry first; the host pages go back, last page first:
  // named to the host queue's back on completion, unnamed to its front on abort.
  std::vector<int32_t> released;
  for (int32_t p : reversed(plan.device_pages()))
    if (before.refs[static_cast<size_t>(p)] == 1) released.push_back(p);
  if (complete)
    for (int64_t e = 0; e < plan.num_pages(); ++e) {
      const int32_t hp = plan.host_pages()[static_cast<size_t>(e)];
      CHECK(!host_names_[static_cast<size_t>(hp)]);
      host_names_[static_cast<size_t>(hp)] =
          dev_names_[static_cast<size_t>(plan.device_pages()[static_cast<size_t>(e)])];
    }
  expect_queue(before, released);
  expect_host_queue(before, reversed(plan.host_pages()));
  CHECK(host_->pages_offloaded() - before.host_offloaded == (complete ? plan.num_pages() : 0));
  CHECK(snapshot().tables == before.tables);
  ended_offloads_.push_back(std::move(plan));
  if (ended_offloads_.size() > 4) ended_offloads_.pop_front();
  offloads_.erase(offloads_.begin() + static_cast<std::ptrdiff_t>(i));
  // A plan ends once.
  OffloadPlan& done = ended_offloads_.back();
  expect_throw([&] { coord_.complete_offload(done); });
  expect_throw([&] { coord_.abort_offload(done); });
}

// Another request takes k pages and gives them back: named free pages are evicted oldest
// first, which is what sends a later match to the host.
void World::evict(int64_t k) {
  k = std::min(k, pool_.num_free());
  std::vector<int32_t> pages(static_cast<size_t>(k));
  const Snapshot before = snapshot();
  CHECK(pool_.allocate(k, pages.data()));
  CHECK(std::equal(pages.begin(), pages.end(), before.queue.begin()));
  for (int32_t p : pages) CHECK(!pool_.is_cached(p));
  forget_evicted();
  const Snapshot mid = snapshot();
  CHECK(pool_.free(pages) == k);
  expect_queue(mid, reversed(pages));
}

// complete_load of request r's pending load; without one, of an ended load (which throws).
void World::complete_load(int r, bool twice) {
  auto& load = loads_[static_cast<size_t>(r)];
  if (!load) {
    LoadPlan none;
    if (!host_)
      expect_throw([&] { coord_.complete_load(none); });
    else if (!ended_loads_.empty())
      expect_throw([&] { coord_.complete_load(ended_loads_.back()); });
    return;
  }
  LoadPlan& plan = load->plan;
  const Snapshot before = snapshot();
  coord_.complete_load(plan);
  CHECK(coord_.load_state(plan) == PlanState::completed);
  // Exactly the plan's device pages take names, unnamed until now: their slots' keys. The
  // host pins drop.
  for (int64_t e = 0; e < plan.num_pages(); ++e) {
    const auto i = static_cast<size_t>(e);
    const int32_t p = plan.device_pages()[i];
    const auto g = static_cast<size_t>(plan.groups()[i]);
    CHECK(tables_[static_cast<size_t>(r)][g].page_ids()[static_cast<size_t>(plan.slots()[i])] == p);
    CHECK(!before.cached[static_cast<size_t>(p)] && pool_.is_cached(p));
    dev_names_[static_cast<size_t>(p)] =
        Name{static_cast<int32_t>(g), slot_key(load->doc, g, plan.slots()[i])};
  }
  CHECK(pool_.num_cached() - before.num_cached == plan.num_pages());
  CHECK(host_->pages_loaded() - before.host_loaded == plan.num_pages());
  CHECK(queue() == before.queue && snapshot().refs == before.refs);
  expect_host_queue(before, reversed(plan.host_pages()));
  for (const BlockTable& t : tables_[static_cast<size_t>(r)]) CHECK(!t.has_pending_load());
  ended_loads_.push_back(std::move(plan));
  if (ended_loads_.size() > 4) ended_loads_.pop_front();
  load.reset();
  if (twice) {
    forget_evicted();
    check();
    expect_throw([&] { coord_.complete_load(ended_loads_.back()); });
  }
}

void World::host_misuse(int r, uint8_t what) {
  auto ts = request(r);
  switch (what % 7) {
    case 0:  // a plan ends once
      if (!ended_offloads_.empty())
        expect_throw([&] { coord_.complete_offload(ended_offloads_.front()); });
      break;
    case 1:
      if (!ended_offloads_.empty())
        expect_throw([&] { coord_.abort_offload(ended_offloads_.front()); });
      break;
    case 2:
      if (!ended_loads_.empty()) expect_throw([&] { coord_.complete_load(ended_loads_.front()); });
      break;
    case 3: {  // a plan of another coordinator
      auto other = scratch();
      std::optional<OffloadPlan> foreign = other_coord_.plan_offload(other, 0);
      CHECK(foreign && foreign->num_pages() == 0);
      expect_throw([&] { coord_.complete_offload(*foreign); });
      expect_throw([&] { coord_.abort_offload(*foreign); });
      break;
    }
    case 4: {
      LoadPlan foreign;
      expect_throw([&] { coord_.complete_load(foreign); });
      break;
    }
    case 5:
      expect_throw([&] { static_cast<void>(coord_.plan_offload(ts, max_extent(r) + 1)); });
      expect_throw([&] { static_cast<void>(coord_.plan_offload(ts, -1)); });
      break;
    default: {  // a coordinator without host
      auto other = scratch();
      const Snapshot before = snapshot();
      bool thrown = false;
      try {
        static_cast<void>(no_host_.plan_offload(other, 0));
      } catch (const std::invalid_argument&) {
        thrown = true;
      }
      CHECK(thrown);
      expect_unchanged(before);
    }
  }
}

void World::step(Input& in) {
  const uint8_t op = in.byte();
  const int r = in.byte() % kRequests;
  const uint8_t a = in.byte(), b = in.byte();
  switch (op % 18) {
    case 0:
      acquire(r, tokens(a, r));
      break;
    case 1: {
      const int64_t first = tokens(a, r);
      const int64_t extra = std::min<int64_t>(b % 8, kMaxTokens - max_extent(r) - first);
      admit(r, first, extra, b & 0x80);
      break;
    }
    case 2:
      reclaim(r, frontier(a, r));
      break;
    case 3:
      free_request(r);
      break;
    case 4:
      group_op(r, (a & 15) % groups(), a >> 4, b);
      break;
    case 5:
      cache(r, b % 3, frontier(a, r), b & 0x80 ? (b >> 4) % 4 : 0);
      break;
    case 6: {
      const int64_t n = a < 128 ? kMaxTokens : (a % 64) * coord_.lcm_block_size();
      match_and_claim(r, b % 3, std::min(n, kMaxTokens), b & 0x80, b & 0x40);
      break;
    }
    case 7:
      claim_saved(r);
      break;
    case 8:
      decode_step();
      break;
    case 9:
      pool_allocate(a % 8);
      break;
    case 10:
      pool_free(a, b);
      break;
    case 11:
      bad_call(r, a);
      break;
    case 12:
      plan_and_apply(a, b);
      break;
    case 13:
      offload(r, frontier(a, r), b % 4);
      break;
    case 14: {
      if (!host_) {
        OffloadPlan none;
        expect_throw([&] { coord_.complete_offload(none); });
        expect_throw([&] { coord_.abort_offload(none); });
      } else if (!offloads_.empty()) {  // a pending plan, counted from the latest
        end_offload(offloads_.size() - 1 - a % offloads_.size(), (b & 1) == 0);
      }
      break;
    }
    case 15:
      evict(a);
      break;
    case 16:
      complete_load(r, a & 1);
      break;
    default:
      host_misuse(r, a);
  }
  forget_evicted();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const int64_t num_blocks = 2 + in.byte() % 31;
  const uint8_t shape = in.byte();
  const int groups = 1 + (shape & 3) % 3;
  const bool retention = (shape & 0x80) == 0;
  const int64_t host_blocks = (shape >> 2) & 31;  // 0: no host pool
  std::vector<GroupSpec> specs;
  for (int g = 0; g < groups; ++g) {
    const uint8_t k = in.byte(), w = in.byte();
    const int64_t B = kPageSizes[(k >> 2) % 6];
    const int64_t W = 1 + w % 40;
    switch (k % 4) {
      case 0:
        specs.emplace_back(GroupKind::full, B);
        break;
      case 1:
        specs.emplace_back(GroupKind::sliding, B, W);
        break;
      case 2:
        specs.emplace_back(GroupKind::sliding, B, W, true);
        break;
      default:
        specs.emplace_back(GroupKind::state, B);
    }
  }
  World world(specs, num_blocks, retention, host_blocks);
  world.check();
  for (int ops = 0; !in.empty() && ops < 256; ++ops) {
    world.step(in);
    world.check();
  }
  return 0;
}
