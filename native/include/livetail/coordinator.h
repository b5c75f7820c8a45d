// Coordinator (semantics section 6): several groups, one pool, one table per group per
// request.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "livetail/host.h"
#include "livetail/managers.h"
#include "livetail/plan.h"
#include "livetail/pool.h"
#include "livetail/prefix.h"
#include "livetail/table.h"

namespace livetail {

struct GroupSpec {
  // Throws std::invalid_argument: a window only (and always) for sliding, live tail only
  // for sliding, page size and window in [1, 2**31 - 1].
  // attention_chunk_size only (and always) for chunked, a multiple of block_size.
  // checkpoints only for a state group with live tail (semantics 13.5).
  GroupSpec(GroupKind kind, int64_t block_size, std::optional<int64_t> sliding_window = {},
            bool live_tail_alloc = false, std::optional<int64_t> attention_chunk_size = {},
            bool checkpoints = false);

  // The constructor's checks, for a spec whose public fields were changed since.
  void check() const;

  GroupKind kind;
  int64_t block_size;
  std::optional<int64_t> sliding_window;
  bool live_tail_alloc;
  std::optional<int64_t> attention_chunk_size;
  bool checkpoints;

  bool operator==(const GroupSpec&) const = default;
};

// What a batched decode step did: requests [0, stepped) acquired their token and
// reclaimed; request `stepped` (if < the batch size) found the pool short and changed
// nothing, nor did any request after it.
struct DecodeResult {
  int64_t stepped;
  int64_t reclaimed;  // pages that re-entered the free queue
};

// A request's references detached from its tables (semantics section 12), released later
// by Coordinator::release_detached in the order free would have released them.
class DetachedTables {
 public:
  // References held (one per real slot the tables had).
  int64_t num_pages() const noexcept { return static_cast<int64_t>(pages_.size()); }
  bool released() const noexcept { return released_; }

 private:
  friend class Coordinator;
  uint64_t coordinator_ = 0;
  std::vector<int32_t> pages_;    // group by group, each in slot order
  std::vector<size_t> group_end_;  // group g's pages end at group_end_[g]
  bool released_ = false;
};

class Coordinator {
 public:
  // Throws std::invalid_argument for no specs or an lcm of page sizes above 2**31 - 1.
  // host: the host tier's pool (semantics section 10), or none. alignment (semantics 13.9):
  // prefix hits land on its multiples and live-tail groups keep resume pages behind them
  // only; 0 = the lcm, else a positive multiple of the lcm up to 2**31 - 1
  // (std::invalid_argument "alignment ..." otherwise, nothing built).
  Coordinator(std::vector<GroupSpec> specs, BlockPool& pool, HostPool* host = nullptr,
              int64_t alignment = 0);

  int64_t num_groups() const noexcept { return static_cast<int64_t>(managers_.size()); }
  int64_t base_block_size() const noexcept { return base_; }
  int64_t lcm_block_size() const noexcept { return lcm_; }
  int64_t alignment() const noexcept { return alignment_; }
  BlockPool& pool() const noexcept { return *pool_; }
  HostPool* host() const noexcept { return host_; }
  const std::vector<GroupSpec>& specs() const noexcept { return specs_; }
  const std::vector<Manager>& managers() const noexcept { return managers_; }

  // `tables`: one table per group, in group order, pairwise distinct, each unbound or bound
  // to this coordinator's pool, none bound by another coordinator (an acquire or claim binds
  // a table to its coordinator until the table is freed or detached; a table a manager bound
  // is taken over by the first acquire), all of one extent (one request's tables cover the
  // same tokens: a table of another request is an error). Every argument of every group is checked before any group
  // acts (std::invalid_argument, nothing changed); groups then act in ascending index.
  bool acquire(std::span<BlockTable* const> tables, int64_t num_tokens);
  int64_t blocks_needed_for(std::span<BlockTable* const> tables, int64_t num_tokens) const;
  int64_t blocks_needed_for_sequential(std::span<BlockTable* const> tables, int64_t first_tokens,
                                       int64_t extra_tokens) const;
  // Sum over groups of Manager::blocks_needed_for_prompt (semantics 13.1), read-only.
  int64_t blocks_needed_for_prompt(std::span<BlockTable* const> tables, int64_t num_tokens,
                                   int64_t max_chunk_tokens, int64_t decode_tokens) const;
  // The whole-prompt charge of a request that first claims `match` into fresh tables: the
  // most free pages the pool gives up at once, the claim's own included (a claimed page
  // another holder pins gives nothing back when reclaimed). Sum over groups, read-only.
  int64_t blocks_needed_for_prompt_after_claim(const PrefixMatch& match, int64_t num_tokens,
                                               int64_t max_chunk_tokens,
                                               int64_t decode_tokens) const;
  int64_t reclaim_expired(std::span<BlockTable* const> tables, int64_t num_computed_tokens);
  int64_t free(std::span<BlockTable* const> tables);

  // One decode step for a batch of requests, equal to this loop of single calls:
  //   for r in 0..R-1:
  //     if not acquire(tables of r, 1): stop   (r and every later request untouched)
  //     reclaimed += reclaim_expired(tables of r, num_computed_tokens[r])
  // `tables` holds R * num_groups() tables, request-major; all pairwise distinct, each
  // request's tables one request's (as for acquire). Every
  // argument is checked first (num_computed_tokens[r] against the extent the acquire
  // creates), so a call that throws changes nothing.
  DecodeResult decode_step(std::span<BlockTable* const> tables,
                           std::span<const int64_t> num_computed_tokens);

  // --- prefix caching (semantics section 8) ----------------------------------------------
  // `keys`: one key per full base page (page_keys), pairwise distinct (std::invalid_argument
  // otherwise, checked in O(len(keys))).

  // Names every real slot j of every group with (j+1)*B <= num_tokens and (j+1)*k <=
  // len(keys) (k = B / base) that has no name yet and can serve a match, as (group,
  // keys[(j+1)*k - 1]): every such slot of a full group; of a sliding group only the R slots
  // behind each multiple of the alignment (semantics 13.4); of a state group only the slot
  // ending exactly at num_tokens, when num_tokens is a multiple of the alignment. Returns the
  // pages newly named. Costs the slots newly covered since the table's last call (a per-table
  // cursor), not the table.
  // num_tokens above a table's extent is an error.
  int64_t cache_full_blocks(std::span<BlockTable* const> tables, std::span<const Key> keys,
                            int64_t num_tokens);
  // The same with the request's token ids from position 0 (semantics section 12): at least
  // num_tokens of them (std::invalid_argument "token_ids ..." otherwise, nothing changed).
  // Each name new to the pool keeps the B token ids of the slot it names (slot j: tokens
  // [j*B, (j+1)*B)), and its stored event carries them.
  int64_t cache_full_blocks(std::span<BlockTable* const> tables, std::span<const Key> keys,
                            int64_t num_tokens, std::span<const uint32_t> token_ids);
  // Read-only: the greatest multiple T of the alignment, T <= len(keys) * base, that every
  // group supports, with the pages to resume from (earliest registered copy in use, else the
  // earliest). Probes at most (T_max / alignment) * (resume pages of the groups) names, plus the
  // longest named prefix of each full group.
  PrefixMatch match_prefix(std::span<const Key> keys) const;
  // The matched real pages that are free now: the free pages claim(match) takes.
  // Throws std::invalid_argument for a match of another coordinator or a stale one (a matched
  // page no longer carries the name it was matched under).
  int64_t blocks_consumed_by_claim(const PrefixMatch& match) const;
  // Shares the matched pages into fresh tables (one reference per slot): every table gets
  // num_tokens / B slots, tail 0, reclaim floor below its resume pages, and is bound. Throws
  // (nothing changed) as blocks_consumed_by_claim does, and for tables that are not fresh.
  // Host-served slots (section 10) get one fresh device page each, all or nothing with the
  // device queue (a shortfall throws, nothing changed), and their host pages are pinned: the
  // returned LoadPlan lists the copies; none when nothing is served from the host. The
  // tables must outlive a pending load.
  std::optional<LoadPlan> claim(std::span<BlockTable* const> tables, const PrefixMatch& match);

  // --- host tier (semantics section 10; defined in host.cpp) ------------------------------
  // Every call throws std::invalid_argument (nothing changed) on a coordinator without host.

  // Host pages for every reachable named device page up to num_tokens whose name the host
  // does not hold (full groups: named slots below num_tokens / B; sliding and state groups:
  // the R slots behind every aligned boundary up to num_tokens), in group then slot order, one
  // all-or-nothing host allocation; each device page gets one more reference. No value
  // (nothing changed) when the host pool is short. num_tokens above an extent throws.
  // max_pages >= 0 (semantics 13.7): at most that many of those pages, the first in
  // write-back order (the aligned boundary each first serves, slot div (alignment / B) + 1,
  // lowest first; then group, then slot), listed by group then slot; the allocation stays
  // all-or-nothing for the pages listed. -1: every page (the whole plan or nothing).
  std::optional<OffloadPlan> plan_offload(std::span<BlockTable* const> tables,
                                          int64_t num_tokens, int64_t max_pages = -1);
  // The copy is done: host pages take the names, the device references drop. Throws for a
  // plan of another coordinator or one that ended already.
  void complete_offload(OffloadPlan& plan);
  // The copy is abandoned: host pages go back unnamed, the device references drop.
  void abort_offload(OffloadPlan& plan);
  // The copy is done: the device pages take the names, the host pins drop. Throws for a plan
  // of another coordinator or one that ended (completed, or aborted by freeing its request).
  void complete_load(LoadPlan& plan);
  PlanState load_state(const LoadPlan& plan) const noexcept;

  // --- deferred free (semantics section 12) ------------------------------------------------
  // Checks the tables as free does, aborts a pending load as free does, and moves their
  // references into the returned handle without releasing any: the tables end empty and
  // unbound, the pages stay pinned (and in pinned_pages). May throw std::bad_alloc (nothing
  // changed).
  DetachedTables detach(std::span<BlockTable* const> tables);
  // Releases the handle's references in the order free(tables) would have at detach time
  // (groups in order, each table's last slot first); returns the pages that re-entered the
  // queue. Throws std::invalid_argument (nothing changed) for a handle released already or
  // one of another coordinator.
  int64_t release_detached(DetachedTables& handle);

  // --- forks (semantics 13.6; defined in fork.cpp) ------------------------------------------
  // One copy copy_tail asks of the engine: group `group`'s tail slot moved from the shared
  // page to the table's own new page.
  struct TailCopy {
    int32_t group;
    int32_t shared_page;
    int32_t new_page;
    bool operator==(const TailCopy&) const = default;
  };
  // Fills the fresh (empty, unbound) tables `into`, one per group, distinct from `tables`,
  // with the pages `tables` hold: every real page gains one reference, holes stay holes; same
  // extent, tail room, reclaim floor and naming cursor, bound to this pool and coordinator
  // (unbound tables fork into unbound ones). Returns, per group, the partially written last
  // slot both requests may still write (copy_tail it before writing past the extent), -1
  // when the extent is page-aligned. Throws std::invalid_argument, nothing changed, for
  // tables checked as acquire checks them, `into` tables that are not fresh, a table with a
  // pending load ("tables[i] has a pending load"), or a page whose count is 2^31 - 1.
  std::vector<int64_t> fork(std::span<BlockTable* const> tables,
                            std::span<BlockTable* const> into);
  // Gives the tables their own copy of every tail page they share: one fresh page per group
  // whose partially written last slot holds a page with count >= 2, taken as one
  // all-or-nothing allocation in group order (no value, nothing changed, when the pool has
  // fewer free pages); each such slot takes its new page and drops one reference of the
  // shared one. Returns the copies the engine makes (empty when no tail is shared). The new
  // page carries no name (a partial page has none). Tables checked as acquire checks them.
  std::optional<std::vector<TailCopy>> copy_tail(std::span<BlockTable* const> tables);

  // Pages group g pins now (taken by its acquires and claims, not yet back in the queue). O(1).
  int64_t pinned_pages(int64_t g) const noexcept { return pinned_[static_cast<size_t>(g)]; }

  // --- step planning (semantics section 9; defined in plan.cpp) ---------------------------
  // Read-only. `tables`: R * num_groups() tables, request-major, in priority order (highest
  // first), all pairwise distinct, each unbound or bound to this pool, each request's tables
  // one request's (as for acquire: one extent, no other coordinator's); num_tokens[r] the
  // tokens request r acquires. Throws std::invalid_argument naming the request.
  StepPlan plan_step(std::span<BlockTable* const> tables,
                     std::span<const int64_t> num_tokens) const;
  // Frees the preempted requests (lowest priority first), then acquires for the stepped
  // ones in priority order. Throws std::invalid_argument, nothing changed, for a plan of
  // another coordinator, one applied already, or a stale one (the pool or a table changed).
  void apply_step(StepPlan& plan);

  // Distinguishes coordinators for PrefixMatch (never reused within a process).
  uint64_t id() const noexcept { return id_; }

 private:
  // Returns the request's extent (all its tables cover the same tokens).
  int64_t check_tables(std::span<BlockTable* const> tables) const;
  void check_tables_general(std::span<BlockTable* const> tables) const;
  void check_tables_outlined(std::span<BlockTable* const> tables) const;  // host.cpp, fork.cpp
  [[noreturn]] void fail_tables(std::span<BlockTable* const> tables) const;
  // Every table unbound, bound by a manager called directly, or bound by this coordinator,
  // and all of tables[0]'s extent; std::invalid_argument naming `name`[i] otherwise.
  void check_request(std::span<BlockTable* const> tables, const char* name) const;
  // The same for one table of a batch call, against its request's first table (whose
  // extent the caller passes): inline tests, the message built out of line.
  void check_member(const BlockTable& t, const BlockTable& first, int64_t extent) const {
    if ((t.coordinator_ != 0 && t.coordinator_ != id_) || t.extent() != extent) [[unlikely]]
      fail_member(t, first);
  }
  [[noreturn]] void fail_member(const BlockTable& t, const BlockTable& first) const;
  // Bound by this coordinator as the group of manager m, or unbound: check_table and
  // check_member's coordinator test pass (coordinator.cpp's check_tables says why). One
  // comparison: a table bound here has a page size, an unbound one has neither a page size
  // nor a coordinator (pool_, block_size_ and coordinator_ are set and cleared together).
  bool bound_here(const BlockTable& t, const Manager& m) const {
    return t.block_size_ == (t.coordinator_ == id_ ? m.block_size() : 0);
  }
  // t's extent when bound_here(t, m) (an unbound table is empty): no test of its page size.
  static int64_t extent_in(const BlockTable& t, const Manager& m) {
    return geometry::extent(t.size(), t.tail_, m.block_size());
  }
  void check_match(const PrefixMatch& match) const;
  void need_host(const char* what) const;
  void check_plan(const CopyPlan& plan, PlanState state, const char* what) const;
  // Ends a pending load whose request is being freed: host pins drop (host.cpp).
  void abort_load(uint64_t id);
  // A partial write-back: the plan's first max_pages entries in write-back order (host.cpp).
  void keep_first(OffloadPlan& plan, int64_t max_pages) const;
  // Drops the device references of an offload, last entry first.
  void release_offloaded(const CopyPlan& plan);
  // Slots behind a boundary that group g needs to resume there; -1 = every slot (full).
  int64_t resume(size_t g) const noexcept;
  // The same at the boundary of b slots: a chunked group's count depends on b (section 13.2).
  int64_t resume_at(size_t g, int64_t b) const noexcept;
  // The count at the boundary ending slot j's period of q slots (the one deciding slot j).
  int64_t resume_behind(size_t g, int64_t j, int64_t q) const noexcept;
  // cache_full_blocks with token ids (nullptr: none), the count of token_ids checked.
  int64_t cache_full_blocks(std::span<BlockTable* const> tables, std::span<const Key> keys,
                            int64_t num_tokens, const uint32_t* token_ids);
  static std::span<const uint32_t> slot_tokens(const uint32_t* ids, int64_t j, int64_t B);
  int64_t token_room(std::span<BlockTable* const> tables, int64_t nkeys, int64_t num_tokens) const;
  size_t host_tokens(const PrefixMatch& match) const noexcept;

  std::vector<GroupSpec> specs_;
  std::vector<Manager> managers_;
  std::vector<int64_t> pinned_;  // per group
  BlockPool* pool_;
  HostPool* host_;
  // Pending loads: each plan's id, host pages and tables (cleared when the load ends).
  struct PendingLoad {
    uint64_t id;
    std::vector<int32_t> host_pages;
    std::vector<BlockTable*> tables;
  };
  std::vector<PendingLoad> loads_;
  uint64_t next_load_ = 1;
  int64_t base_ = 0;
  int64_t lcm_ = 0;
  int64_t alignment_ = 0;
  uint64_t id_;
};

}  // namespace livetail
