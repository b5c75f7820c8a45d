// The fuzz target's shared parts (native/fuzz/README.md gives the input encoding): the
// checks' macro, the input reader, the state snapshots, and World, the coordinator under test
// with the model the checks compare it against. World's operations live one family per file:
//   fuzz_api.cpp     the entry point: the input's header, then World::step, which decodes
//                    each call and dispatches it to its family
//   fuzz_world.cpp   snapshots, the invariants after every call, the model's expectations
//   fuzz_alloc.cpp   ops 0-4, 8: coordinator and single-group acquire, reclaim, free, decode
//   fuzz_prefix.cpp  ops 5-7: naming, match_prefix, claim
//   fuzz_pool.cpp    ops 9-11, 15: the engine's own pages, usage errors, eviction
//   fuzz_plan.cpp    op 12: plan_step and apply_step
//   fuzz_host.cpp    ops 13, 14, 16, 17: the host tier
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "livetail/coordinator.h"

namespace livetail::fuzz {

constexpr int kRequests = 3;
constexpr int64_t kMaxTokens = 2048;  // per table: keeps the documents' keys precomputed
constexpr int64_t kPageSizes[] = {1, 2, 3, 4, 8, 16};

// Aborts with the file, line and text of the failed check.
[[noreturn]] void violated(const char* file, int line, const char* what);
#define CHECK(cond)                                   \
  do {                                                \
    if (!(cond)) violated(__FILE__, __LINE__, #cond); \
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
const std::vector<Key>& doc_keys(int doc, int64_t base);

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
inline std::vector<int32_t> reversed(std::span<const int32_t> pages) {
  return {pages.rbegin(), pages.rend()};
}

std::vector<int32_t> copy_queue(const BlockPool& pool);

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
  // fuzz_alloc.cpp: ops 0-4 and 8.
  void acquire(int r, int64_t n);
  void admit(int r, int64_t first, int64_t extra, bool reclaim_between);
  void reclaim(int r, int64_t f);
  void free_request(int r);
  // Request r's pending load ended with its free: the coordinator aborted it.
  void end_freed_load(int r);
  void group_op(int r, size_t g, uint8_t what, uint8_t arg);
  void decode_step();
  // fuzz_prefix.cpp: ops 5-7.
  void keep_load(int r, LoadPlan plan, int doc);
  void cache(int r, int doc, int64_t n, int64_t fewer_keys);
  void match_and_claim(int r, int doc, int64_t n, bool keep, bool complete);
  void claim_saved(int r);
  // fuzz_pool.cpp: ops 9-11 and 15.
  void pool_allocate(int64_t k);
  void pool_free(uint8_t a, uint8_t b);
  void evict(int64_t k);
  void bad_call(int r, uint8_t what);
  // fuzz_plan.cpp: op 12.
  void plan_and_apply(uint8_t a, uint8_t b);
  // fuzz_host.cpp: ops 13, 14, 16 and 17.
  void offload(int r, int64_t n, uint8_t end);
  void end_offload(size_t i, bool complete);
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

}  // namespace livetail::fuzz
