#include "livetail/pool.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace livetail {

BlockPool::BlockPool(int64_t num_blocks, bool retention, bool events)
    : num_blocks_(num_blocks), num_free_(0), fresh_(1), retention_(retention), events_on_(events) {
  if (num_blocks < 1 || num_blocks > geometry::INT32_MAX_TOKENS)
    throw std::invalid_argument("num_blocks must be in [1, 2**31 - 1], got " +
                                std::to_string(num_blocks));
  const auto n = static_cast<size_t>(num_blocks);
  ref_.reset(static_cast<int32_t*>(std::calloc(n, sizeof(int32_t))));
  link_.reset(static_cast<Link*>(std::malloc((n + 1) * sizeof(Link))));
  if (!ref_ || !link_) throw std::bad_alloc();
  link_[0] = {0, 0};
  link_[n] = {static_cast<int32_t>(n), static_cast<int32_t>(n)};
  num_free_ = num_blocks - 1;
}

int32_t BlockPool::ref_count(int64_t page) const {
  if (page < 0 || page >= num_blocks_)
    throw std::invalid_argument("page must be in [0, num_blocks), got " + std::to_string(page));
  return ref_[page];
}

bool BlockPool::allocate(int64_t k, int32_t* out) {
  if (k < 0) throw std::invalid_argument("k must be >= 0, got " + std::to_string(k));
  if (k > num_free_) return false;
  take(k, out);
  return true;
}

int64_t BlockPool::free(std::span<const int32_t> pages) {
  // Dry run: count the releases down, then put them back, so a bad batch changes nothing.
  size_t bad = pages.size();
  for (size_t i = 0; i < pages.size(); ++i) {
    const int32_t p = pages[i];
    if (p <= 0 || p >= num_blocks_ || ref_[p] == 0) {
      bad = i;
      break;
    }
    --ref_[p];
  }
  for (size_t i = 0; i < bad; ++i) ++ref_[pages[i]];
  if (bad != pages.size())
    throw std::invalid_argument("pages[" + std::to_string(bad) +
                                "] = " + std::to_string(pages[bad]) +
                                " is the null page, out of range, or not pinned that often");
  Releaser r(*this);
  for (size_t i = pages.size(); i-- > 0;) r.release(pages[i]);
  return r.done();
}

void BlockPool::copy_free_queue(int32_t* out) const noexcept {
  for (int32_t p = link_[num_blocks_].next; p != num_blocks_; p = link_[p].next) *out++ = p;
  for (int64_t p = fresh_; p < num_blocks_; ++p) *out++ = static_cast<int32_t>(p);
  for (int32_t p = link_[0].next; p != 0; p = link_[p].next) *out++ = p;
}

void BlockPool::copy_ref_counts(int32_t* out) const noexcept {
  for (int64_t p = 0; p < num_blocks_; ++p) out[p] = ref_[p];
}

// --- prefix-cache names -------------------------------------------------------------------

namespace {

// Keys are digests, but any 32 bytes are accepted: mix all of them with the group.
inline uint64_t name_hash(int32_t group, const Key& key) noexcept {
  uint64_t w[4];
  std::memcpy(w, key.data(), sizeof w);
  uint64_t h = w[0] ^ std::rotl(w[1], 17) ^ std::rotl(w[2], 31) ^ std::rotl(w[3], 47) ^
               static_cast<uint64_t>(static_cast<uint32_t>(group)) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 33;  // murmur3 finalizer
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

inline uint64_t slot_value(uint64_t hash, int32_t rec) noexcept {
  return (hash & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(rec);
}

inline int32_t slot_rec(uint64_t v) noexcept { return static_cast<int32_t>(v & 0x7FFFFFFF); }

inline size_t slot_home(uint64_t v, size_t mask) noexcept { return (v >> 32) & mask; }

}  // namespace

// The slot of (group, key) in the name table, or the empty slot where it would go.
size_t BlockPool::probe(int32_t group, const Key& key, uint64_t h) const noexcept {
  const size_t mask = name_table_.size() - 1;
  for (size_t i = (h >> 32) & mask;; i = (i + 1) & mask) {
    const uint64_t v = name_table_[i];
    if (v == 0) return i;
    if ((v >> 32) == (h >> 32)) {  // a 32-bit hash match: confirm on the record
      const NameRec& r = recs_[static_cast<size_t>(slot_rec(v))];
      if (r.group == group && r.key == key) return i;
    }
  }
}

void BlockPool::prefetch_name(int32_t page, int32_t group, const Key& key) const noexcept {
  __builtin_prefetch(&page_name_[static_cast<size_t>(page)]);
  const size_t mask = name_table_.size() - 1;
  __builtin_prefetch(&name_table_[(name_hash(group, key) >> 32) & mask]);
}

int32_t BlockPool::find_name(int32_t group, const Key& key) const noexcept {
  if (name_table_.empty()) return 0;
  return slot_rec(name_table_[probe(group, key, name_hash(group, key))]);  // 0 when empty
}

int32_t BlockPool::lookup(int32_t rec) const noexcept {
  const int32_t head = recs_[static_cast<size_t>(rec)].head;
  // Prefer a copy in use, so that a claim does not spend a free page on it.
  for (int32_t p = head; p != 0; p = page_name_[static_cast<size_t>(p)].next)
    if (ref_[p] >= 1) return p;
  return head;
}

bool BlockPool::has_name(int32_t page, int32_t group, const Key& key) const noexcept {
  if (!is_cached(page)) return false;
  const NameRec& r = recs_[static_cast<size_t>(page_name_[static_cast<size_t>(page)].rec)];
  return r.group == group && r.key == key;
}

void BlockPool::rehash(size_t size) {
  std::vector<uint64_t> table(size, 0);  // the only throw: nothing changed yet
  const size_t mask = size - 1;
  for (size_t r = 1; r < recs_.size(); ++r) {
    if (recs_[r].group < 0) continue;
    const uint64_t h = name_hash(recs_[r].group, recs_[r].key);
    size_t i = (h >> 32) & mask;
    while (table[i] != 0) i = (i + 1) & mask;
    table[i] = slot_value(h, static_cast<int32_t>(r));
  }
  name_table_.swap(table);
}

void BlockPool::reserve_names(int64_t extra, int64_t extra_tokens) {
  // Only pages that were allocated (ids below fresh_) can be in a table.
  if (page_name_.size() < static_cast<size_t>(fresh_))
    page_name_.resize(static_cast<size_t>(fresh_));
  const auto want = static_cast<size_t>(num_names_ + extra);
  if (2 * want > name_table_.size()) rehash(std::bit_ceil(std::max<size_t>(16, 2 * want)));
  const size_t recs = std::max<size_t>(recs_.size(), 1) + static_cast<size_t>(extra);
  if (recs > recs_.capacity()) recs_.reserve(std::max(recs, 2 * recs_.capacity()));
  if (recs_.empty()) recs_.push_back(NameRec{{}, -1, 0, 0, 0, 0});
  if (extra_tokens == 0) return;
  const auto more = static_cast<size_t>(extra_tokens);
  if (tokens_.size() > 2 * static_cast<size_t>(live_tokens_) + more) {
    // Dropped names' ids outweigh the live ones: copy the live ones into a new array.
    std::vector<uint32_t> live;
    live.reserve(static_cast<size_t>(live_tokens_) + more);  // the only throw
    for (NameRec& r : recs_) {
      if (r.group < 0 || r.num_tokens == 0) continue;
      const auto at = static_cast<uint64_t>(live.size());
      live.insert(live.end(), tokens_.begin() + static_cast<ptrdiff_t>(r.token_at),
                  tokens_.begin() + static_cast<ptrdiff_t>(r.token_at + r.num_tokens));
      r.token_at = at;
    }
    tokens_.swap(live);
  } else if (tokens_.size() + more > tokens_.capacity()) {
    tokens_.reserve(std::max(tokens_.size() + more, 2 * tokens_.capacity()));
  }
}

int BlockPool::set_name(int32_t page, int32_t group, const Key& key, const uint32_t* tokens,
                        uint32_t num_tokens) noexcept {
  PageName& pn = page_name_[static_cast<size_t>(page)];
  if (pn.rec != 0) return 0;  // a page named once keeps its name
  int result = 1;
  const uint64_t h = name_hash(group, key);
  const size_t slot = probe(group, key, h);
  int32_t rec = slot_rec(name_table_[slot]);
  if (rec == 0) {
    if (unused_rec_ != 0) {
      rec = unused_rec_;
      unused_rec_ = recs_[static_cast<size_t>(rec)].head;
    } else {
      rec = static_cast<int32_t>(recs_.size());
      recs_.emplace_back();  // capacity reserved by reserve_names
    }
    recs_[static_cast<size_t>(rec)] = NameRec{key, group, 0, 0, num_tokens, tokens_.size()};
    if (num_tokens != 0) {  // capacity reserved by reserve_names
      tokens_.insert(tokens_.end(), tokens, tokens + num_tokens);
      live_tokens_ += num_tokens;
    }
    name_table_[slot] = slot_value(h, rec);
    ++num_names_;
    ++stats_.names_stored;
    result = 2;
  }
  NameRec& r = recs_[static_cast<size_t>(rec)];
  pn = PageName{rec, 0, r.tail};  // registration order: append
  if (r.tail != 0)
    page_name_[static_cast<size_t>(r.tail)].next = page;
  else
    r.head = page;
  r.tail = page;
  ++num_named_;
  ++stats_.pages_named;
  return result;
}

size_t BlockPool::name_slot(int32_t rec) const noexcept {
  const NameRec& r = recs_[static_cast<size_t>(rec)];
  const size_t mask = name_table_.size() - 1;
  size_t i = (name_hash(r.group, r.key) >> 32) & mask;
  while (slot_rec(name_table_[i]) != rec) i = (i + 1) & mask;
  return i;
}

void BlockPool::drop_name(int32_t page) {
  PageName& pn = page_name_[static_cast<size_t>(page)];
  if (ref_[page] == 0) --named_free_;  // the page is queued
  ++stats_.pages_evicted;
  const int32_t rec = pn.rec;
  NameRec& r = recs_[static_cast<size_t>(rec)];
  if (pn.prev != 0)
    page_name_[static_cast<size_t>(pn.prev)].next = pn.next;
  else
    r.head = pn.next;
  if (pn.next != 0)
    page_name_[static_cast<size_t>(pn.next)].prev = pn.prev;
  else
    r.tail = pn.prev;
  pn = PageName{0, 0, 0};
  --num_named_;
  if (r.head != 0) return;
  ++stats_.names_removed;
  if (events_on_) note_removed(r.group, r.key);
  // The name's last page: remove the name, shifting later entries of its probe run back.
  const size_t mask = name_table_.size() - 1;
  size_t hole = name_slot(rec);
  for (size_t j = (hole + 1) & mask; name_table_[j] != 0; j = (j + 1) & mask) {
    // Entry j may fill the hole unless its home lies cyclically in (hole, j].
    if (((j - slot_home(name_table_[j], mask)) & mask) >= ((j - hole) & mask)) {
      name_table_[hole] = name_table_[j];
      hole = j;
    }
  }
  name_table_[hole] = 0;
  live_tokens_ -= r.num_tokens;
  r.num_tokens = 0;
  r.group = -1;
  r.head = unused_rec_;
  unused_rec_ = rec;
  --num_names_;
}

void BlockPool::note_stored(int32_t group, int64_t slot, const Key& key, const Key* parent,
                            std::span<const uint32_t> tokens, bool has_tokens) {
  if (!events_.empty() && last_event_op_ == event_op_) {
    Event& e = events_.back();
    if (e.kind == EventKind::stored && e.group == group &&
        e.first_slot + static_cast<int64_t>(e.key_count) == slot && e.has_tokens == has_tokens) {
      event_keys_.push_back(key);  // a run of consecutive slots: one event, chain order
      ++e.key_count;
      event_tokens_.insert(event_tokens_.end(), tokens.begin(), tokens.end());
      e.token_count += tokens.size();
      return;
    }
  }
  Event e{EventKind::stored,  group, slot, parent != nullptr, has_tokens, {}, event_keys_.size(),
          1,                  event_tokens_.size(), tokens.size()};
  if (parent != nullptr) e.parent = *parent;
  event_keys_.push_back(key);
  event_tokens_.insert(event_tokens_.end(), tokens.begin(), tokens.end());
  events_.push_back(e);
  last_event_op_ = event_op_;
}

void BlockPool::note_removed(int32_t group, const Key& key) {
  if (!events_.empty() && last_event_op_ == event_op_) {
    Event& e = events_.back();
    if (e.kind == EventKind::removed && e.group == group) {
      event_keys_.push_back(key);  // evicted by the same allocation, in eviction order
      ++e.key_count;
      return;
    }
  }
  events_.push_back(
      Event{EventKind::removed, group, -1, false, false, {}, event_keys_.size(), 1, 0, 0});
  event_keys_.push_back(key);
  last_event_op_ = event_op_;
}

// --- semantics section 12 ---------------------------------------------------------------------

bool BlockPool::name(int64_t page, int32_t& group, Key& key) const {
  if (page < 0 || page >= num_blocks_)
    throw std::invalid_argument("page must be in [0, num_blocks), got " + std::to_string(page));
  if (!is_cached(page)) return false;
  const NameRec& r = recs_[static_cast<size_t>(page_name_[static_cast<size_t>(page)].rec)];
  group = r.group;
  key = r.key;
  return true;
}

std::span<const uint32_t> BlockPool::name_tokens(int64_t page) const noexcept {
  if (!is_cached(page)) return {};
  const NameRec& r = recs_[static_cast<size_t>(page_name_[static_cast<size_t>(page)].rec)];
  return {tokens_.data() + r.token_at, r.num_tokens};
}

bool BlockPool::reset_names() {
  if (named_free_ != num_named_) return false;  // a named page is pinned
  if (events_on_) {
    events_.reserve(events_.size() + 1);  // the only throw: nothing changed yet
    events_.push_back(Event{EventKind::cleared, -1, -1, false, false, {}, event_keys_.size(), 0,
                            event_tokens_.size(), 0});
    last_event_op_ = event_op_;
  }
  stats_.pages_evicted += num_named_;
  stats_.names_removed += num_names_;
  std::fill(page_name_.begin(), page_name_.end(), PageName{0, 0, 0});
  std::fill(name_table_.begin(), name_table_.end(), uint64_t{0});
  if (!recs_.empty()) recs_.resize(1);
  unused_rec_ = 0;
  tokens_.clear();
  live_tokens_ = 0;
  num_names_ = num_named_ = named_free_ = 0;
  end_event_op();
  return true;
}

int64_t BlockPool::evict_names(std::span<const int64_t> pages) {
  for (size_t i = 0; i < pages.size(); ++i)
    if (pages[i] <= 0 || pages[i] >= num_blocks_)
      throw std::invalid_argument("pages[" + std::to_string(i) + "] = " +
                                  std::to_string(pages[i]) + " is the null page or out of range");
  if (events_on_) {  // the only throws (std::bad_alloc): one removed key per page at most
    events_.reserve(events_.size() + pages.size());
    event_keys_.reserve(event_keys_.size() + pages.size());
  }
  std::vector<int32_t> moved;
  moved.reserve(pages.size());
  int64_t dropped = 0;
  for (const int64_t p64 : pages) {
    const auto p = static_cast<int32_t>(p64);
    if (!is_cached(p)) continue;  // unnamed, or a repeat already dropped
    const bool queued = ref_[p] == 0;
    drop_name(p);
    ++dropped;
    if (queued && retention_) moved.push_back(p);
  }
  // Unnamed now: to the front, as a release of the list would put them (pages[0] at the head).
  const auto F = static_cast<int32_t>(num_blocks_);
  for (size_t i = moved.size(); i-- > 0;) {
    const int32_t p = moved[i];
    const Link l = link_[p];  // a named queued page sits in the back list
    link_[l.prev].next = l.next;
    link_[l.next].prev = l.prev;
    const int32_t front = link_[F].next;
    link_[p] = {front, F};
    link_[front].prev = p;  // front == F: p is also the front list's tail
    link_[F].next = p;
  }
  version_ += !moved.empty();
  if (dropped != 0) end_event_op();
  return dropped;
}

}  // namespace livetail
