// Block pool (semantics section 2): page ids 0..num_blocks-1, page 0 the null page, one free
// queue, reference counts. Retention rule: a page whose count drops to 0 joins the queue's back
// if it carries a prefix-cache name and its front if it carries none.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "livetail/geometry.h"
#include "livetail/prefix.h"

namespace livetail {

class BlockPool {
 public:
  // Throws std::invalid_argument unless 1 <= num_blocks <= 2**31 - 1. retention = false keeps
  // the earlier order: every freed page joins the back, named or not.
  // events: queue stored/removed events for take_events() (off: no event work at all).
  explicit BlockPool(int64_t num_blocks, bool retention = true, bool events = false);
  BlockPool(const BlockPool&) = delete;  // tables point at their pool
  BlockPool& operator=(const BlockPool&) = delete;

  int64_t num_blocks() const noexcept { return num_blocks_; }
  int64_t num_free() const noexcept { return num_free_; }
  int64_t num_pinned() const noexcept { return num_blocks_ - 1 - num_free_; }
  bool retention() const noexcept { return retention_; }
  // Change counter: grows with every change to the queue or to a reference count (a step
  // plan, semantics section 9, uses it to tell it is stale).
  uint64_t version() const noexcept { return version_; }
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

  // --- prefix-cache names (semantics section 8) ----------------------------------------
  // A page carries at most one name, (group index, key). A name survives free (the page stays
  // matchable in the queue) and is dropped when an allocation pops the page (eviction).
  // Pages that carry a name, in use or free. O(1).
  int64_t num_cached() const noexcept { return num_named_; }
  // Named pages in the free queue. O(1): a counter kept by every queue change.
  int64_t num_cached_free() const noexcept { return named_free_; }
  // Distinct names (group, key) the pool holds. O(1).
  int64_t num_names() const noexcept { return num_names_; }

  // Monotone counters (semantics section 11), all O(1) to read.
  struct Stats {
    int64_t pages_allocated = 0;     // pages taken from the free queue by allocations
    int64_t pages_released = 0;      // pages that re-entered the free queue
    int64_t pages_named = 0;         // pages given a name (cache_full_blocks)
    int64_t pages_evicted = 0;       // named free pages an allocation took (name dropped)
    int64_t names_stored = 0;        // names new to the pool (keys of stored events)
    int64_t names_removed = 0;       // names the pool lost (keys of removed events)
    int64_t match_calls = 0;         // match_prefix calls
    int64_t match_tokens_queried = 0;  // len(keys) * base summed over match_prefix calls
    int64_t match_tokens_matched = 0;  // num_tokens summed over match_prefix calls
    int64_t pages_claimed = 0;       // references claims took on matched real pages
    int64_t pages_claimed_free = 0;  // of those, pages a claim took out of the free queue
  };
  const Stats& stats() const noexcept { return stats_; }

  // Events (semantics sections 11-12), queued in order when the pool was built with events on.
  enum class EventKind : uint8_t { stored, removed, cleared };
  struct Event {
    EventKind kind;
    int32_t group;       // cleared: -1
    int64_t first_slot;  // stored: the group slot of keys[0]; otherwise -1
    bool has_parent;     // stored: the key of slot first_slot - 1 is `parent`
    bool has_tokens;     // stored: the names carry token ids (block_size per key)
    Key parent;
    size_t key_begin, key_count;      // into event_keys()
    size_t token_begin, token_count;  // into event_tokens()
  };
  bool events_enabled() const noexcept { return events_on_; }
  const std::vector<Event>& events() const noexcept { return events_; }
  const std::vector<Key>& event_keys() const noexcept { return event_keys_; }
  const std::vector<uint32_t>& event_tokens() const noexcept { return event_tokens_; }
  void clear_events() noexcept {
    events_.clear();
    event_keys_.clear();
    event_tokens_.clear();
  }

  // --- semantics section 12 -------------------------------------------------------------
  // The name of a page: false for page 0 and unnamed pages, else true with group and key set.
  // Throws std::invalid_argument ("page ...") unless 0 <= page < num_blocks. O(1).
  bool name(int64_t page, int32_t& group, Key& key) const;
  // The token ids the name of a named page was registered with (empty: none). O(1).
  std::span<const uint32_t> name_tokens(int64_t page) const noexcept;
  // Drops every name unless a named page is pinned (then false, nothing changed). Queue order,
  // reference counts and the change counter stay; one cleared event. O(pages ever named).
  bool reset_names();
  // Drops the names of the given pages (free or pinned), in list order; returns how many
  // lost one (unnamed pages skipped, repeats counted once). Free pages that lost a name move
  // to the queue's front as an unnamed release of the list would put them (pages[0] at the
  // head; without retention they stay in place). Throws std::invalid_argument ("pages[i]
  // ...", nothing changed) for page 0 or an id outside [1, num_blocks).
  int64_t evict_names(std::span<const int64_t> pages);
  bool is_cached(int64_t page) const noexcept {
    return page >= 0 && static_cast<size_t>(page) < page_name_.size() &&
           page_name_[static_cast<size_t>(page)].rec != 0;
  }

  class Taker;
  class Releaser;

 private:
  friend class Coordinator;
  friend struct PoolTestAccess;  // native/tests: puts a reference count at its limit
  struct Link {
    int32_t next, prev;
  };
  struct FreeDeleter {
    void operator()(void* p) const noexcept { std::free(p); }
  };
  // One name and its pages, in registration order (head = earliest). group < 0: unused,
  // head links the unused records.
  struct NameRec {
    Key key;
    int32_t group, head, tail;
    uint32_t num_tokens;  // token ids the name carries (0: none), at tokens_[token_at]
    uint64_t token_at;
  };
  // Per page: its name's record (0 = no name) and its neighbours among that name's pages.
  struct PageName {
    int32_t rec, next, prev;
  };

  // Inner helpers for the coordinator: arguments are valid pages and groups.
  // The record of (group, key), 0 if no page carries that name.
  int32_t find_name(int32_t group, const Key& key) const noexcept;
  // The earliest registered page of record rec that is in use, else its earliest one.
  int32_t lookup(int32_t rec) const noexcept;
  bool has_name(int32_t page, int32_t group, const Key& key) const noexcept;
  // Makes the next `extra` set_name calls, carrying `extra_tokens` token ids together, and
  // their stored events allocation-free (may throw std::bad_alloc; changes nothing observable).
  void reserve_names(int64_t extra, int64_t extra_tokens = 0);
  // Names a page in use that has no name yet: 0 if it has one (nothing done), 1 if named
  // under a name the pool already holds, 2 if the name is new to the pool (which then keeps
  // the `num_tokens` token ids at `tokens`).
  int set_name(int32_t page, int32_t group, const Key& key, const uint32_t* tokens = nullptr,
               uint32_t num_tokens = 0) noexcept;
  // Drops the name of a named page (eviction; the page is queued or pinned).
  void drop_name(int32_t page);
  // Event queue: a stored key for group slot `slot` (parent: the key of slot - 1, or null),
  // joined to the previous event when it continues its run within the same operation and
  // both carry token ids or neither does.
  void note_stored(int32_t group, int64_t slot, const Key& key, const Key* parent,
                   std::span<const uint32_t> tokens = {}, bool has_tokens = false);
  void note_removed(int32_t group, const Key& key);
  // Room for `keys` more event keys (and events) and `tokens` more event token ids.
  void reserve_events(int64_t keys, int64_t tokens) {
    events_.reserve(events_.size() + static_cast<size_t>(keys));
    event_keys_.reserve(event_keys_.size() + static_cast<size_t>(keys));
    event_tokens_.reserve(event_tokens_.size() + static_cast<size_t>(tokens));
  }
  // Ends an operation: later events never join an earlier operation's event.
  void end_event_op() noexcept { ++event_op_; }
  // One more reference to a real page; a queued one leaves the queue wherever it is. The
  // caller (Coordinator::claim) has checked the count is below 2^31 - 1.
  void take_shared(int32_t page) noexcept {
    if (ref_[page] == 0) {  // queued, and in a list: the page was allocated before
      const Link l = link_[page];
      link_[l.prev].next = l.next;
      link_[l.next].prev = l.prev;
      --num_free_;
      ++stats_.pages_claimed_free;
      if (is_cached(page)) --named_free_;
    }
    ++stats_.pages_claimed;
    ++ref_[page];
    ++version_;
  }
  // Starts loading what set_name(page, group, key) will read (naming walks many slots).
  void prefetch_name(int32_t page, int32_t group, const Key& key) const noexcept;
  size_t probe(int32_t group, const Key& key, uint64_t hash) const noexcept;
  size_t name_slot(int32_t rec) const noexcept;
  void rehash(size_t size);

  // The queue is the front list link_[F].next .. (F = num_blocks_, its sentinel: unnamed
  // released pages, the last released first), then [fresh_, num_blocks_) (pages never yet
  // allocated, in id order), then the back list link_[0].next .. link_[0].prev (slot 0 is its
  // sentinel: the null page is never queued; named released pages, oldest first). The
  // never-used range thus sits between the two lists, which lets a pool of 2**31 pages start
  // in O(1) without touching its arrays. Without retention the front list stays empty.
  int64_t num_blocks_;
  int64_t num_free_;
  int64_t fresh_;
  bool retention_;
  uint64_t version_ = 0;
  std::unique_ptr<int32_t[], FreeDeleter> ref_;  // calloc: zero pages appear lazily
  std::unique_ptr<Link[], FreeDeleter> link_;    // num_blocks_ + 1 entries; pages below fresh_

  // Names: a flat open-addressing hash map on (group, key) (linear probing, load <= 1/2,
  // backward-shift deletion) whose slots hold (32-bit hash << 32 | record), 0 = empty.
  std::vector<NameRec> recs_;         // [0] unused: record 0 means "no name"
  int32_t unused_rec_ = 0;            // head of the unused records
  std::vector<uint64_t> name_table_;  // size a power of two, or empty
  std::vector<PageName> page_name_;   // indexed by page; covers every page ever named
  int64_t num_names_ = 0;             // distinct names
  int64_t num_named_ = 0;             // named pages
  int64_t named_free_ = 0;            // named pages in the queue
  // Token ids of the names that carry them, one flat array: record r's at
  // [recs_[r].token_at, + num_tokens). Dropped names leave garbage, compacted by
  // reserve_names once it outweighs the live ids.
  std::vector<uint32_t> tokens_;
  int64_t live_tokens_ = 0;

  Stats stats_;
  bool events_on_;
  uint64_t event_op_ = 0;             // operation counter: events join only within one
  uint64_t last_event_op_ = ~uint64_t{0};
  std::vector<Event> events_;
  std::vector<Key> event_keys_;
  std::vector<uint32_t> event_tokens_;
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
        names_(p.num_named_ != 0 ? p.page_name_.data() : nullptr),
        names_end_(static_cast<int64_t>(p.page_name_.size())),
        end_(p.num_blocks_),
        fresh_(p.fresh_),
        front_(p.link_[p.num_blocks_].next),
        head_(p.link_[0].next) {}
  // Caller has checked that the queue holds enough pages.
  [[gnu::always_inline]] int32_t pop() noexcept {
    int32_t p;
    if (front_ != end_) {  // an unnamed released page: no name to drop
      p = front_;
      front_ = link_[p].next;
    } else if (fresh_ < end_) {
      p = static_cast<int32_t>(fresh_++);
    } else {
      p = head_;
      head_ = link_[p].next;
      // Eviction: the oldest free page loses its name (no name lookups when none exist).
      if (names_ != nullptr && p < names_end_ && names_[p].rec != 0) [[unlikely]] {
        pool_.drop_name(p);
        evicted_ = 1;
      }
    }
    ref_[p] = 1;
    ++taken_;
    return p;
  }
  // Returns how many pages were taken.
  int64_t done() noexcept {
    pool_.fresh_ = fresh_;
    pool_.link_[end_].next = front_;
    pool_.link_[front_].prev = static_cast<int32_t>(end_);  // front_ == end_: resets the tail
    pool_.link_[0].next = head_;
    pool_.link_[head_].prev = 0;  // head_ == 0 (queue emptied) resets the tail to the sentinel too
    pool_.num_free_ -= taken_;
    pool_.stats_.pages_allocated += taken_;
    pool_.event_op_ += evicted_;  // an allocation that evicted ends its removed events' run
    pool_.version_ += taken_ != 0;
    return taken_;
  }

 private:
  BlockPool& pool_;
  int32_t* ref_;
  Link* link_;
  const PageName* names_;  // nullptr while no page is named
  int64_t names_end_;
  int64_t end_, fresh_;
  int32_t front_, head_;
  int64_t taken_ = 0;
  uint64_t evicted_ = 0;
};

// A run of releases (retention rule: unnamed pages onto the queue's front, named ones onto
// its back), state in locals as for Taker.
class BlockPool::Releaser {
 public:
  explicit Releaser(BlockPool& p) noexcept
      : pool_(p),
        ref_(p.ref_.get()),
        link_(p.link_.get()),
        names_(p.num_named_ != 0 ? p.page_name_.data() : nullptr),
        names_end_(static_cast<int64_t>(p.page_name_.size())),
        sentinel_(static_cast<int32_t>(p.num_blocks_)),
        front_(p.link_[p.num_blocks_].next),
        tail_(p.link_[0].prev),
        retention_(p.retention_) {}
  // Page is a non-null page with count >= 1. True if it re-entered the queue.
  [[gnu::always_inline]] bool release(int32_t page) noexcept {
    changed_ = true;
    if (--ref_[page] != 0) return false;  // still shared (prefix caching)
    const bool named = names_ != nullptr && page < names_end_ && names_[page].rec != 0;
    if (retention_ && !named) {
      link_[page] = {front_, sentinel_};
      link_[front_].prev = page;  // front_ == sentinel_: page is also the front list's tail
      front_ = page;
    } else {
      link_[tail_].next = page;  // tail_ == 0: the sentinel, so page becomes the head
      link_[page] = {0, tail_};
      tail_ = page;
    }
    named_released_ += named;
    ++released_;
    return true;
  }
  int64_t done() noexcept {
    pool_.link_[sentinel_].next = front_;
    pool_.link_[0].prev = tail_;
    pool_.num_free_ += released_;
    pool_.named_free_ += named_released_;
    pool_.stats_.pages_released += released_;
    pool_.version_ += changed_;
    return released_;
  }

 private:
  BlockPool& pool_;
  int32_t* ref_;
  Link* link_;
  const PageName* names_;  // nullptr while no page is named
  int64_t names_end_;
  int32_t sentinel_, front_, tail_;
  bool retention_;
  bool changed_ = false;
  int64_t released_ = 0;
  int64_t named_released_ = 0;
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
