// Block table (semantics section 3): one per request per group.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "livetail/geometry.h"
#include "livetail/pool.h"

namespace livetail {

// Destroying a bound table does not return its pages (the pool cannot know): free it first.
class BlockTable {
 public:
  BlockTable() = default;
  BlockTable(const BlockTable&) = delete;  // a copy would hold pages it has no reference to
  BlockTable& operator=(const BlockTable&) = delete;
  BlockTable(BlockTable&& o) noexcept
      : slots_(std::move(o.slots_)),
        pool_(std::exchange(o.pool_, nullptr)),
        block_size_(std::exchange(o.block_size_, 0)),
        tail_(std::exchange(o.tail_, 0)),
        floor_(std::exchange(o.floor_, 0)),
        real_(std::exchange(o.real_, 0)),
        named_upto_(std::exchange(o.named_upto_, 0)),
        load_(std::exchange(o.load_, 0)),
        coordinator_(std::exchange(o.coordinator_, 0)) {
    o.slots_.clear();
  }

  // Slot s covers tokens [s*B, (s+1)*B); its page id, 0 for a hole.
  std::span<const int32_t> page_ids() const noexcept { return slots_; }
  int64_t size() const noexcept { return static_cast<int64_t>(slots_.size()); }
  int64_t tail_available() const noexcept { return tail_; }
  int64_t reclaim_floor() const noexcept { return floor_; }
  int64_t num_real_pages() const noexcept { return real_; }
  // Tokens covered; an unbound table is empty.
  int64_t extent() const noexcept {
    return block_size_ ? geometry::extent(size(), tail_, block_size_) : 0;
  }
  bool is_bound() const noexcept { return pool_ != nullptr; }
  const BlockPool* pool() const noexcept { return pool_; }
  // Page size of the group that filled it (0 while unbound).
  int64_t block_size() const noexcept { return block_size_; }
  // Empty and unbound: what a claim needs.
  bool is_fresh() const noexcept { return slots_.empty() && pool_ == nullptr; }
  // Slots below it were offered prefix-cache names and are never revisited.
  int64_t named_upto() const noexcept { return named_upto_; }
  // A claim's pending load (semantics section 10): freeing the request aborts it.
  bool has_pending_load() const noexcept { return load_ != 0; }

 private:
  friend class Manager;
  friend class Coordinator;

  std::vector<int32_t> slots_;       // page ids, 0 = hole; capacity survives free
  const BlockPool* pool_ = nullptr;  // set by the first acquire, cleared by free
  int64_t block_size_ = 0;           // set and cleared with pool_
  int64_t tail_ = 0;
  int64_t floor_ = 0;
  int64_t real_ = 0;
  int64_t named_upto_ = 0;  // set by cache_full_blocks and claim, cleared by free
  uint64_t load_ = 0;       // the pending load's id in its coordinator, 0 = none
  // The id of the coordinator whose acquire or claim bound it (0 = none: unbound, or bound
  // by a manager called directly); cleared with pool_. Other coordinators reject the table.
  uint64_t coordinator_ = 0;
  uint64_t visit_ = 0;      // last batch call that saw this table (finds repeats in O(1))
};

}  // namespace livetail
