// Block pool (semantics section 2): page ids 0..num_blocks-1, page 0 the null page, one FIFO
// free queue, reference counts.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "livetail/geometry.h"

namespace livetail {

class BlockPool {
 public:
  // Throws std::invalid_argument unless 1 <= num_blocks <= 2**31 - 1.
  explicit BlockPool(int64_t num_blocks);
  BlockPool(const BlockPool&) = delete;  // tables point at their pool
  BlockPool& operator=(const BlockPool&) = delete;

  int64_t num_blocks() const noexcept { return num_blocks_; }
  int64_t num_free() const noexcept { return num_free_; }
  int64_t num_pinned() const noexcept { return num_blocks_ - 1 - num_free_; }
  // Throws std::invalid_argument unless 0 <= page < num_blocks.
  int32_t ref_count(int64_t page) const;

  // Section 2 for engines that hand out pages themselves: all-or-nothing take of the first
  // k queued pages into out[0..k); false (nothing changed) when fewer than k are free.
  bool allocate(int64_t k, int32_t* out);
  // Releases pages[n-1] first, down to pages[0]; returns how many re-entered the queue.
  // Throws std::invalid_argument (nothing changed) for the null page, an out-of-range id,
  // or more releases of a page than it has references.
  int64_t free(std::span<const int32_t> pages);

  // Queue order, num_free() entries.
  void copy_free_queue(int32_t* out) const noexcept;
  // num_blocks() entries.
  void copy_ref_counts(int32_t* out) const noexcept;

  // Unchecked hot path: caller has checked num_free() >= k.
  [[gnu::always_inline]] inline void take(int64_t k, int32_t* out) noexcept;
  // Unchecked hot path: page is a non-null page with count >= 1. True if it re-entered.
  [[gnu::always_inline]] inline bool release(int32_t page) noexcept;

  class Taker;
  class Releaser;

 private:
  struct Link {
    int32_t next, prev;
  };
  struct FreeDeleter {
    void operator()(void* p) const noexcept { std::free(p); }
  };

  // The queue is [fresh_, num_blocks_) (pages never yet allocated, in id order) followed by
  // the intrusive list link_[0].next .. link_[0].prev (slot 0 is the sentinel: the null page is
  // never queued). Freed pages always join the back, so the never-used range stays in
  // front, which lets a pool of 2**31 pages start in O(1) without touching its arrays.
  int64_t num_blocks_;
  int64_t num_free_;
  int64_t fresh_;
  std::unique_ptr<int32_t[], FreeDeleter> ref_;  // calloc: zero pages appear lazily
  std::unique_ptr<Link[], FreeDeleter> link_;    // only read for pages below fresh_
};

// A run of pops from the queue's front with the queue state held in locals: the callers
// store page ids into int32 slots between pops, which may alias the pool's int32 arrays, so
// members would be reloaded per page. No other pool call may run before done().
class BlockPool::Taker {
 public:
  explicit Taker(BlockPool& p) noexcept
      : pool_(p),
        ref_(p.ref_.get()),
        link_(p.link_.get()),
        end_(p.num_blocks_),
        fresh_(p.fresh_),
        head_(p.link_[0].next) {}
  // Caller has checked that the queue holds enough pages.
  [[gnu::always_inline]] int32_t pop() noexcept {
    int32_t p;
    if (fresh_ < end_) {
      p = static_cast<int32_t>(fresh_++);
    } else {
      p = head_;
      head_ = link_[p].next;
    }
    ref_[p] = 1;
    ++taken_;
    return p;
  }
  // Returns how many pages were taken.
  int64_t done() noexcept {
    pool_.fresh_ = fresh_;
    pool_.link_[0].next = head_;
    pool_.link_[head_].prev = 0;  // head_ == 0 (queue emptied) resets the tail to the sentinel too
    pool_.num_free_ -= taken_;
    return taken_;
  }

 private:
  BlockPool& pool_;
  int32_t* ref_;
  Link* link_;
  int64_t end_, fresh_;
  int32_t head_;
  int64_t taken_ = 0;
};

// A run of releases onto the queue's back, state in locals as for Taker.
class BlockPool::Releaser {
 public:
  explicit Releaser(BlockPool& p) noexcept
      : pool_(p), ref_(p.ref_.get()), link_(p.link_.get()), tail_(p.link_[0].prev) {}
  // Page is a non-null page with count >= 1. True if it re-entered the queue.
  [[gnu::always_inline]] bool release(int32_t page) noexcept {
    if (--ref_[page] != 0) return false;  // still shared (prefix caching)
    link_[tail_].next = page;             // tail_ == 0: the sentinel, so page becomes the head
    link_[page] = {0, tail_};
    tail_ = page;
    ++released_;
    return true;
  }
  int64_t done() noexcept {
    pool_.link_[0].prev = tail_;
    pool_.num_free_ += released_;
    return released_;
  }

 private:
  BlockPool& pool_;
  int32_t* ref_;
  Link* link_;
  int32_t tail_;
  int64_t released_ = 0;
};

inline void BlockPool::take(int64_t k, int32_t* out) noexcept {
  Taker t(*this);
  for (int64_t i = 0; i < k; ++i) out[i] = t.pop();
  t.done();
}

inline bool BlockPool::release(int32_t page) noexcept {
  Releaser r(*this);
  const bool back = r.release(page);
  r.done();
  return back;
}

}  // namespace livetail
