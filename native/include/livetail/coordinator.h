// Coordinator (semantics section 6): several groups, one pool, one table per group per
// request.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "livetail/managers.h"
#include "livetail/plan.h"
#include "livetail/pool.h"
#include "livetail/prefix.h"
#include "livetail/table.h"

namespace livetail {

struct GroupSpec {
  // Throws std::invalid_argument: a window only (and always) for sliding, live tail only
  // for sliding, page size and window in [1, 2**31 - 1].
  GroupSpec(GroupKind kind, int64_t block_size, std::optional<int64_t> sliding_window = {},
            bool live_tail_alloc = false);

  // The constructor's checks, for a spec whose public fields were changed since.
  void check() const;

  GroupKind kind;
  int64_t block_size;
  std::optional<int64_t> sliding_window;
  bool live_tail_alloc;

  bool operator==(const GroupSpec&) const = default;
};

// What a batched decode step did: requests [0, stepped) acquired their token and
// reclaimed; request `stepped` (if < the batch size) found the pool short and changed
// nothing, nor did any request after it.
struct DecodeResult {
  int64_t stepped;
  int64_t reclaimed;  // pages that re-entered the free queue
};

class Coordinator {
 public:
  // Throws std::invalid_argument for no specs or an lcm of page sizes above 2**31 - 1.
  Coordinator(std::vector<GroupSpec> specs, BlockPool& pool);

  int64_t num_groups() const noexcept { return static_cast<int64_t>(managers_.size()); }
  int64_t base_block_size() const noexcept { return base_; }
  int64_t lcm_block_size() const noexcept { return lcm_; }
  BlockPool& pool() const noexcept { return *pool_; }
  const std::vector<GroupSpec>& specs() const noexcept { return specs_; }
  const std::vector<Manager>& managers() const noexcept { return managers_; }

  // `tables`: one table per group, in group order, pairwise distinct, each unbound or bound
  // to this coordinator's pool. Every argument of every group is checked before any group
  // acts (std::invalid_argument, nothing changed); groups then act in ascending index.
  bool acquire(std::span<BlockTable* const> tables, int64_t num_tokens);
  int64_t blocks_needed_for(std::span<BlockTable* const> tables, int64_t num_tokens) const;
  int64_t blocks_needed_for_sequential(std::span<BlockTable* const> tables, int64_t first_tokens,
                                       int64_t extra_tokens) const;
  int64_t reclaim_expired(std::span<BlockTable* const> tables, int64_t num_computed_tokens);
  int64_t free(std::span<BlockTable* const> tables);

  // One decode step for a batch of requests, equal to this loop of single calls:
  //   for r in 0..R-1:
  //     if not acquire(tables of r, 1): stop   (r and every later request untouched)
  //     reclaimed += reclaim_expired(tables of r, num_computed_tokens[r])
  // `tables` holds R * num_groups() tables, request-major; all pairwise distinct. Every
  // argument is checked first (num_computed_tokens[r] against the extent the acquire
  // creates), so a call that throws changes nothing.
  DecodeResult decode_step(std::span<BlockTable* const> tables,
                           std::span<const int64_t> num_computed_tokens);

  // --- prefix caching (semantics section 8) ----------------------------------------------
  // `keys`: one key per full base page (page_keys), pairwise distinct (std::invalid_argument
  // otherwise, checked in O(len(keys))).

  // Names every real slot j of every group with (j+1)*B <= num_tokens and (j+1)*k <=
  // len(keys) (k = B / base) that has no name yet, as (group, keys[(j+1)*k - 1]); state groups
  // only the slot ending exactly at num_tokens. Returns the pages newly named. Costs the slots
  // newly covered since the table's last call (a per-table cursor), not the table.
  // num_tokens above a table's extent is an error.
  int64_t cache_full_blocks(std::span<BlockTable* const> tables, std::span<const Key> keys,
                            int64_t num_tokens);
  // Read-only: the greatest multiple T of the lcm, T <= len(keys) * base, that every group
  // supports, with the pages to resume from (earliest registered copy in use, else the
  // earliest). Probes at most (T_max / lcm) * (resume pages of the groups) names, plus the
  // longest named prefix of each full group.
  PrefixMatch match_prefix(std::span<const Key> keys) const;
  // The matched real pages that are free now: the free pages claim(match) takes.
  // Throws std::invalid_argument for a match of another coordinator or a stale one (a matched
  // page no longer carries the name it was matched under).
  int64_t blocks_consumed_by_claim(const PrefixMatch& match) const;
  // Shares the matched pages into fresh tables (one reference per slot): every table gets
  // num_tokens / B slots, tail 0, reclaim floor below its resume pages, and is bound. Throws
  // (nothing changed) as blocks_consumed_by_claim does, and for tables that are not fresh.
  void claim(std::span<BlockTable* const> tables, const PrefixMatch& match);

  // Pages group g pins now (taken by its acquires and claims, not yet back in the queue). O(1).
  int64_t pinned_pages(int64_t g) const noexcept { return pinned_[static_cast<size_t>(g)]; }

  // --- step planning (semantics section 9; defined in plan.cpp) ---------------------------
  // Read-only. `tables`: R * num_groups() tables, request-major, in priority order (highest
  // first), all pairwise distinct, each unbound or bound to this pool; num_tokens[r] the
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
  void check_tables(std::span<BlockTable* const> tables) const;
  [[noreturn]] void fail_tables(std::span<BlockTable* const> tables) const;
  void check_match(const PrefixMatch& match) const;
  // Slots behind a boundary that group g needs to resume there; -1 = every slot (full).
  int64_t resume(size_t g) const noexcept;

  std::vector<GroupSpec> specs_;
  std::vector<Manager> managers_;
  std::vector<int64_t> pinned_;  // per group
  BlockPool* pool_;
  int64_t base_ = 0;
  int64_t lcm_ = 0;
  uint64_t id_;
};

}  // namespace livetail
