// The Coordinator's device operations (acquire, reclaim, free, decode step) and prefix caching
// (naming, match, claim); GroupSpec, the constructor and the argument checks' out-of-line
// paths (their messages) are in coordinator_setup.cpp, deferred free in detach.cpp.
#include "livetail/coordinator.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <stdexcept>
#include <string>
#include "fail.h"

namespace livetail {

using detail::fail;
using detail::at;

namespace {

// Batch calls stamp each table they see; a repeat shows as a stamp already equal to this
// call's. Atomic so that coordinators used from different threads never share a stamp.
std::atomic<uint64_t> next_visit{1};

// The g tables are non-null and pairwise distinct: up to four groups, the pairs written out.
[[gnu::always_inline]] inline bool distinct(BlockTable* const* t, size_t g) {
  switch (g) {
    case 1:
      return t[0] != nullptr;
    case 2:
      return (t[0] != nullptr) & (t[1] != nullptr) & (t[0] != t[1]);
    case 3:
      return (t[0] != nullptr) & (t[1] != nullptr) & (t[2] != nullptr) & (t[0] != t[1]) &
             (t[0] != t[2]) & (t[1] != t[2]);
    case 4:
      return (t[0] != nullptr) & (t[1] != nullptr) & (t[2] != nullptr) & (t[3] != nullptr) &
             (t[0] != t[1]) & (t[0] != t[2]) & (t[0] != t[3]) & (t[1] != t[2]) &
             (t[1] != t[3]) & (t[2] != t[3]);
    default:
      break;
  }
  bool ok = true;
  for (size_t i = 0; i < g; ++i) {
    ok &= t[i] != nullptr;
    for (size_t j = 0; j < i; ++j) ok &= t[j] != t[i];
  }
  return ok;
}

}  // namespace

// One table per group, non-null, pairwise distinct (groups are few: the pairs are cheap),
// each unbound or bound to this pool and filled by this group's page size, none bound by
// another coordinator, all of one extent (tables of two requests are not one request).
// Returns that extent.
//
// The common case is tested first, with few loads per table: every table bound by this
// coordinator as this group (coordinator_ == id_ and this group's page size) or unbound,
// and of tables[0]'s extent. A table this coordinator bound is bound to its pool (acquire,
// claim, decode_step and apply_step set pool_ and coordinator_ together; free and detach
// clear both; a manager acts on it only with that same pool), so that case needs no pool
// test; an unbound table has no coordinator, page size or pool (all cleared together).
// Any other table (bound by a manager, or failing) takes the general checks out of line.
[[gnu::always_inline]] inline int64_t Coordinator::check_tables(
    std::span<BlockTable* const> tables) const {
  const size_t g = managers_.size();
  if (tables.size() != g || !distinct(tables.data(), g)) [[unlikely]]
    fail_tables(tables);
  const Manager* m = managers_.data();
  const int64_t extent = tables[0]->extent();
  bool ours = true;
  for (size_t i = 0; i < g; ++i) {
    const BlockTable& t = *tables[i];
    ours &= bound_here(t, m[i]) & (extent_in(t, m[i]) == extent);
  }
  if (!ours) [[unlikely]]
    check_tables_general(tables);
  return extent;
}

void Coordinator::check_tables_outlined(std::span<BlockTable* const> tables) const {
  (void)check_tables(tables);
}

bool Coordinator::acquire(std::span<BlockTable* const> tables, int64_t num_tokens) {
  Manager::check_count(num_tokens, "num_tokens");
  check_tables(tables);
  const Manager* m = managers_.data();
  const size_t g = managers_.size();
  int64_t need = 0;  // summed once, from the closed forms: no group acts unless every group can
  for (size_t i = 0; i < g; ++i) {
    const BlockTable& t = *tables[i];
    m[i].check_fits(t.size(), t.tail_, num_tokens, "num_tokens");
    need += m[i].needed_unchecked(t, num_tokens);
  }
  if (num_tokens == 0) return true;
  if (need == 0) {  // tail room only (a decode step mostly): no page taken, no slot added
    for (size_t i = 0; i < g; ++i) {
      m[i].acquire_unchecked(*pool_, *tables[i], num_tokens);
      tables[i]->coordinator_ = id_;
    }
    return true;
  }
  if (need > pool_->num_free()) return false;
  for (size_t i = 0; i < g; ++i) m[i].reserve_unchecked(*tables[i], num_tokens);  // may throw
  for (size_t i = 0; i < g; ++i) {
    const int64_t before = pool_->num_free();
    m[i].acquire_unchecked(*pool_, *tables[i], num_tokens);
    tables[i]->coordinator_ = id_;
    pinned_[i] += before - pool_->num_free();
  }
  return true;
}

int64_t Coordinator::blocks_needed_for(std::span<BlockTable* const> tables,
                                       int64_t num_tokens) const {
  Manager::check_count(num_tokens, "num_tokens");
  check_tables(tables);
  int64_t need = 0;
  for (size_t i = 0; i < managers_.size(); ++i) {
    const BlockTable& t = *tables[i];
    managers_[i].check_fits(t.size(), t.tail_, num_tokens, "num_tokens");
    need += managers_[i].needed_unchecked(t, num_tokens);
  }
  return need;
}

int64_t Coordinator::blocks_needed_for_sequential(std::span<BlockTable* const> tables,
                                                  int64_t first_tokens,
                                                  int64_t extra_tokens) const {
  Manager::check_count(first_tokens, "first_tokens");
  Manager::check_count(extra_tokens, "extra_tokens");
  check_tables(tables);
  int64_t need = 0;
  for (size_t i = 0; i < managers_.size(); ++i)  // each call checks before it sums
    need += managers_[i].blocks_needed_for_sequential(*tables[i], first_tokens, extra_tokens);
  return need;
}

int64_t Coordinator::blocks_needed_for_prompt(std::span<BlockTable* const> tables,
                                              int64_t num_tokens, int64_t max_chunk_tokens,
                                              int64_t decode_tokens) const {
  Manager::check_count(num_tokens, "num_tokens");
  Manager::check_chunk(max_chunk_tokens);
  Manager::check_count(decode_tokens, "decode_tokens");
  check_tables(tables);
  int64_t need = 0;
  for (size_t i = 0; i < managers_.size(); ++i)  // each call checks before it sums
    need += managers_[i].blocks_needed_for_prompt(*tables[i], num_tokens, max_chunk_tokens,
                                                  decode_tokens);
  return need;
}

int64_t Coordinator::reclaim_expired(std::span<BlockTable* const> tables,
                                     int64_t num_computed_tokens) {
  const int64_t extent = check_tables(tables);  // the request's: one frontier test
  const size_t g = managers_.size();
  bool ok = num_computed_tokens >= 0 && num_computed_tokens <= extent;
  for (size_t i = 0; i < g; ++i) ok &= !tables[i]->has_pending_load();
  if (!ok) [[unlikely]]
    for (size_t i = 0; i < g; ++i) {  // the first failing check's message
      Manager::check_no_load(*tables[i]);
      managers_[i].check_frontier(*tables[i], num_computed_tokens);
    }
  int64_t reentered = 0;
  for (size_t i = 0; i < g; ++i) {
    const int64_t r = managers_[i].reclaim_unchecked(*pool_, *tables[i], num_computed_tokens);
    pinned_[i] -= r;
    reentered += r;
  }
  return reentered;
}

int64_t Coordinator::free(std::span<BlockTable* const> tables) {
  check_tables(tables);
  int64_t reentered = 0;
  for (size_t i = 0; i < managers_.size(); ++i) {
    if (tables[i]->load_ != 0) abort_load(tables[i]->load_);
    if (!tables[i]->is_bound()) continue;
    const int64_t r = managers_[i].free_unchecked(*pool_, *tables[i]);
    pinned_[i] -= r;
    reentered += r;
  }
  return reentered;
}

DecodeResult Coordinator::decode_step(std::span<BlockTable* const> tables,
                                      std::span<const int64_t> num_computed_tokens) {
  const size_t g = managers_.size();
  const size_t r = num_computed_tokens.size();
  if (tables.size() / g != r || tables.size() % g != 0)  // never forms r * g, which may wrap
    fail("requests", "must hold " + std::to_string(g) + " tables per request (" +
                         std::to_string(r) + " requests), got " + std::to_string(tables.size()));
  const uint64_t visit = next_visit.fetch_add(1, std::memory_order_relaxed);
  const BlockTable* first = nullptr;  // the request's first table (one extent per request)
  int64_t extent = 0;                 // and its extent
  for (size_t i = 0; i < tables.size(); ++i) {
    BlockTable* t = tables[i];
    const size_t req = i / g;
    const Manager& m = managers_[i % g];
    const int64_t f = num_computed_tokens[req];
    try {  // messages are built only on failure: validation stays cheap per table
      if (t == nullptr) fail("table", "is null");
      if (t->visit_ == visit) fail("table", "appears twice in the batch");
      t->visit_ = visit;
      const bool opens = &m == managers_.data();  // group 0's table opens each request
      if (opens) first = t, extent = extent_in(*t, m);  // as t->extent() where it matters
      if (!bound_here(*t, m) || extent_in(*t, m) != extent) [[unlikely]] {  // see check_tables
        m.check_table(pool_, *t);
        check_member(*t, *first, extent);
      }
      Manager::check_no_load(*t);
      m.check_fits(t->size(), t->tail_, 1, "num_tokens");
      // The request's frontier, once: its other tables have its extent (checked above).
      if (opens) {
        Manager::check_count(f, "num_computed_tokens");
        // The reclaim runs after the acquire, so its frontier may reach the new token.
        if (f > geometry::frontier_after(t->size(), t->tail_, m.block_size(), 1))
          fail("num_computed_tokens",
               "= " + std::to_string(f) + " is above the extent " + "the acquire leaves");
      }
    } catch (const std::invalid_argument& e) {
      fail("requests[" + std::to_string(req) + "][" + std::to_string(i % g) + "]:", e.what());
    }
  }
  for (size_t i = 0; i < tables.size(); ++i) managers_[i % g].reserve_unchecked(*tables[i], 1);
  DecodeResult res{0, 0};
  const Manager* m = managers_.data();
  for (; res.stepped < static_cast<int64_t>(r); ++res.stepped) {
    BlockTable* const* ts = tables.data() + static_cast<size_t>(res.stepped) * g;
    int64_t need = 0;
    for (size_t k = 0; k < g; ++k) need += m[k].needed_unchecked(*ts[k], 1);
    if (need > pool_->num_free()) break;
    const int64_t f = num_computed_tokens[static_cast<size_t>(res.stepped)];
    for (size_t k = 0; k < g; ++k) {
      const int64_t before = pool_->num_free();
      m[k].acquire_unchecked(*pool_, *ts[k], 1);
      ts[k]->coordinator_ = id_;
      pinned_[k] += before - pool_->num_free();
    }
    for (size_t k = 0; k < g; ++k) {
      const int64_t r = m[k].reclaim_unchecked(*pool_, *ts[k], f);
      pinned_[k] -= r;
      res.reclaimed += r;
    }
  }
  return res;
}

// --- prefix caching (semantics section 8) ---------------------------------------------------

int64_t Coordinator::resume(size_t g) const noexcept {
  const Manager& m = managers_[g];
  if (m.kind() == GroupKind::chunked) [[unlikely]]
    return 0;  // not full: its count depends on the boundary (resume_at)
  return m.kind() == GroupKind::full ? -1
                                     : geometry::resume_pages(m.sliding_window(), m.block_size());
}

int64_t Coordinator::cache_full_blocks(std::span<BlockTable* const> tables,
                                       std::span<const Key> keys, int64_t num_tokens,
                                       const uint32_t* token_ids) {
  Manager::check_count(num_tokens, "num_tokens");
  check_tables(tables);
  check_keys(keys);
  const size_t g = managers_.size();
  const auto nkeys = static_cast<int64_t>(keys.size());
  int64_t extra = 0;  // names this call may add at most
  for (size_t i = 0; i < g; ++i) {
    const BlockTable& t = *tables[i];
    const int64_t B = managers_[i].block_size();
    const int64_t extent = geometry::extent(t.size(), t.tail_, B);
    if (num_tokens > extent)
      fail("num_tokens", "= " + std::to_string(num_tokens) + " is past the table's extent " +
                             std::to_string(extent));
    const int64_t covered = std::min(num_tokens / B, nkeys / (B / base_));
    extra +=
        managers_[i].kind() == GroupKind::state ? 1 : std::max<int64_t>(0, covered - t.named_upto_);
  }
  // The only throws (std::bad_alloc): nothing named yet. Events: one key (and its B token
  // ids) per name at most.
  const int64_t extra_tokens = token_ids != nullptr ? token_room(tables, nkeys, num_tokens) : 0;
  pool_->reserve_names(extra, extra_tokens);
  if (pool_->events_enabled()) pool_->reserve_events(extra, extra_tokens);
  int64_t named = 0;
  for (size_t i = 0; i < g; ++i) {
    BlockTable& t = *tables[i];
    const int64_t B = managers_[i].block_size();
    const int64_t k = B / base_;
    const int64_t covered = std::min(num_tokens / B, nkeys / k);
    const int32_t* s = t.slots_.data();
    const auto group = static_cast<int32_t>(i);
    const bool events = pool_->events_enabled();
    auto name = [&](int64_t j) {
      const int32_t p = s[j];
      if (p == 0) return;
      const Key& key = keys[static_cast<size_t>((j + 1) * k - 1)];
      const std::span<const uint32_t> tok = slot_tokens(token_ids, j, B);
      const int r = pool_->set_name(p, group, key, tok.data(), static_cast<uint32_t>(tok.size()));
      named += r != 0;
      // A name new to the pool is a stored event; its parent is the previous slot's key.
      if (r == 2 && events)
        pool_->note_stored(group, j, key, j > 0 ? &keys[static_cast<size_t>(j * k - 1)] : nullptr,
                           tok, token_ids != nullptr);
    };
    const int64_t q = alignment_ / B;  // the alignment in this group's pages
    if (managers_[i].kind() == GroupKind::state) {
      // Only the slot ending exactly at num_tokens holds a usable state snapshot, only one
      // ending on a multiple of the alignment can serve a match (13.4), and only a slot at or
      // past the cursor is offered a name: below it lie the slots a claim brought in, whose
      // loads may still be pending (complete_load names them).
      const int64_t j = num_tokens / B - 1;
      if (num_tokens % B == 0 && (j + 1) % q == 0 && j >= t.named_upto_ && j < covered) name(j);
    } else {
      // Slots below the cursor were offered a name before: a hole stays a hole, and a named
      // page in use cannot be evicted, so they need no second look. A sliding group names
      // only the R slots behind each multiple of the alignment (13.4): the first `lead` slots
      // of every period of q stay unnamed (none for a full group, nor when R >= q).
      auto lead_of = [&](int64_t j) {  // a chunked group's R depends on j's period (13.2)
        const int64_t R = resume_behind(i, j, q);
        return R < 0 ? 0 : std::max<int64_t>(0, q - R);
      };
      auto offered = [&](int64_t j) { return lead_of(j) == 0 || j % q >= lead_of(j); };
      constexpr int64_t kAhead = 8;  // names miss the cache: overlap the next ones' loads
      for (int64_t j = t.named_upto_; j < covered; ++j) {
        if (!offered(j)) {
          j += lead_of(j) - j % q - 1;  // to the period's first offered slot (the loop adds one)
          continue;
        }
        const int64_t a = j + kAhead;
        if (a < covered && s[a] != 0 && offered(a))
          pool_->prefetch_name(s[a], group, keys[static_cast<size_t>((a + 1) * k - 1)]);
        name(j);
      }
    }
    t.named_upto_ = std::max(t.named_upto_, covered);
  }
  pool_->end_event_op();
  return named;
}

int64_t Coordinator::cache_full_blocks(std::span<BlockTable* const> tables,
                                       std::span<const Key> keys, int64_t num_tokens) {
  return cache_full_blocks(tables, keys, num_tokens, static_cast<const uint32_t*>(nullptr));
}

int64_t Coordinator::cache_full_blocks(std::span<BlockTable* const> tables,
                                       std::span<const Key> keys, int64_t num_tokens,
                                       std::span<const uint32_t> token_ids) {
  Manager::check_count(num_tokens, "num_tokens");
  if (static_cast<int64_t>(token_ids.size()) < num_tokens)
    fail("token_ids", "holds " + std::to_string(token_ids.size()) +
                          " token ids, fewer than num_tokens = " + std::to_string(num_tokens));
  return cache_full_blocks(tables, keys, num_tokens, token_ids.data());
}

// Section 12's token ids, kept apart from the naming loop: slot j's B ids. The callers
// checked (j + 1) * B <= num_tokens <= 2**31 - 1, so the offsets cannot overflow.
std::span<const uint32_t> Coordinator::slot_tokens(const uint32_t* ids, int64_t j, int64_t B) {
  if (ids == nullptr) return {};
  return {ids + j * B, static_cast<size_t>(B)};
}

// Token ids the host names a match serves carry (section 12: a load copies them).
size_t Coordinator::host_tokens(const PrefixMatch& match) const noexcept {
  size_t n = 0;
  for (const PrefixMatch::HostNamed& h : match.host_named_) n += host_->name_tokens(h.page).size();
  return n;
}

// Token ids the names a cache_full_blocks call adds may carry at most: B per slot offered.
int64_t Coordinator::token_room(std::span<BlockTable* const> tables, int64_t nkeys,
                                int64_t num_tokens) const {
  int64_t room = 0;
  for (size_t i = 0; i < managers_.size(); ++i) {
    const int64_t B = managers_[i].block_size();
    const int64_t covered = std::min(num_tokens / B, nkeys / (B / base_));
    room += B * (managers_[i].kind() == GroupKind::state
                     ? 1
                     : std::max<int64_t>(0, covered - tables[i]->named_upto_));
  }
  return room;
}

PrefixMatch Coordinator::match_prefix(std::span<const Key> keys) const {
  check_keys(keys);
  const size_t g = managers_.size();
  const int64_t per = alignment_ / base_;  // keys per aligned boundary
  // Boundaries t * alignment for t in [1, top]; a claimed table spans at most INT32_MAX tokens.
  int64_t top = std::min(static_cast<int64_t>(keys.size()) / per,
                         geometry::INT32_MAX_TOKENS / alignment_);
  auto key = [&](size_t i, int64_t j) -> const Key& {  // the name of group i's slot j
    return keys[static_cast<size_t>((j + 1) * (managers_[i].block_size() / base_) - 1)];
  };
  // A full group supports exactly the boundaries inside its longest named prefix. Its names'
  // records are kept for the pages below (per-thread scratch: no allocation once warm).
  // With a host tier a slot is present if its name is on the device or on the host (section
  // 10); full_recs then holds the device record, or the host record with the top bit set.
  const BlockPool* host = host_;
  constexpr uint32_t kHostRec = 0x80000000u;
  auto find = [&](size_t i, int64_t j) -> uint32_t {
    const auto group = static_cast<int32_t>(i);
    const int32_t rec = pool_->find_name(group, key(i, j));
    if (rec != 0 || host == nullptr) return static_cast<uint32_t>(rec);
    const int32_t hrec = host->find_name(group, key(i, j));
    return hrec == 0 ? 0 : static_cast<uint32_t>(hrec) | kHostRec;
  };
  thread_local std::vector<uint32_t> full_recs;
  thread_local std::vector<size_t> full_at;
  full_recs.clear();
  full_at.assign(g, 0);
  for (size_t i = 0; i < g; ++i) {
    if (resume(i) >= 0) continue;
    const int64_t slots_per = alignment_ / managers_[i].block_size();
    const int64_t cap = top * slots_per;
    full_at[i] = full_recs.size();
    for (int64_t j = 0; j < cap; ++j) {
      const uint32_t rec = find(i, j);
      if (rec == 0) break;
      full_recs.push_back(rec);
    }
    top = static_cast<int64_t>(full_recs.size() - full_at[i]) / slots_per;
  }
  // Sliding and state support is not monotone in T: try every boundary from the top.
  int64_t t = top;
  for (; t > 0; --t) {
    bool ok = true;
    for (size_t i = 0; i < g && ok; ++i) {
      if (resume(i) < 0) continue;
      const int64_t b = t * (alignment_ / managers_[i].block_size());
      const int64_t R = resume_at(i, b);
      for (int64_t j = std::max<int64_t>(0, b - R); j < b && ok; ++j) ok = find(i, j) != 0;
    }
    if (ok) break;
  }
  PrefixMatch out;
  out.coordinator_ = id_;
  out.num_tokens_ = t * alignment_;
  BlockPool::Stats& st = pool_->stats_;
  ++st.match_calls;
  st.match_tokens_queried += static_cast<int64_t>(keys.size()) * base_;
  st.match_tokens_matched += out.num_tokens_;
  out.begin_.resize(g + 1);
  int64_t slots = 0, real = 0;
  for (size_t i = 0; i < g; ++i) {
    const int64_t b = t * (alignment_ / managers_[i].block_size());
    const int64_t R = resume_at(i, b);
    out.begin_[i] = slots;
    slots += b;
    real += R < 0 ? b : std::min(b, R);
  }
  out.begin_[g] = slots;
  out.pages_.assign(static_cast<size_t>(slots), 0);  // holes below the resume pages
  out.host_pages_.assign(static_cast<size_t>(slots), 0);
  out.named_.reserve(static_cast<size_t>(real));
  if (host != nullptr) out.host_named_.reserve(static_cast<size_t>(real));
  for (size_t i = 0; i < g; ++i) {
    const int64_t b = out.begin_[i + 1] - out.begin_[i];
    const int64_t R = resume_at(i, b);
    int32_t* pages = out.pages_.data() + out.begin_[i];
    const int64_t k = managers_[i].block_size() / base_;
    for (int64_t j = R < 0 ? 0 : std::max<int64_t>(0, b - R); j < b; ++j) {
      const Key& kj = key(i, j);
      const uint32_t rec = R < 0 ? full_recs[full_at[i] + static_cast<size_t>(j)] : find(i, j);
      if ((rec & kHostRec) == 0) {  // device copies preferred slot by slot
        const int32_t page = pool_->lookup(static_cast<int32_t>(rec));
        pages[j] = page;
        out.named_.push_back({page, static_cast<int32_t>(i), kj});
      } else {
        const int32_t hp = host->lookup(static_cast<int32_t>(rec & ~kHostRec));
        out.host_pages_[static_cast<size_t>(out.begin_[i] + j)] = hp;
        PrefixMatch::HostNamed h{hp, static_cast<int32_t>(i), j, kj, j > 0, Key{}};
        if (j > 0) h.parent = keys[static_cast<size_t>(j * k - 1)];
        out.host_named_.push_back(h);
      }
    }
  }
  return out;
}

void Coordinator::check_match(const PrefixMatch& match) const {
  if (match.coordinator_ != id_) fail("match", "comes from another coordinator");
  for (const PrefixMatch::Named& n : match.named_)
    if (!pool_->has_name(n.page, n.group, n.key))
      fail("match", "is stale: page " + std::to_string(n.page) +
                        " was evicted since the match (match again)");
  for (const PrefixMatch::HostNamed& n : match.host_named_)
    if (host_ == nullptr || !static_cast<const BlockPool*>(host_)->has_name(n.page, n.group, n.key))
      fail("match", "is stale: host page " + std::to_string(n.page) +
                        " was evicted since the match (match again)");
}

int64_t Coordinator::blocks_consumed_by_claim(const PrefixMatch& match) const {
  check_match(match);
  // Matched pages are distinct (one name per page, one slot per name), so no set is needed.
  int64_t n = 0;
  for (const PrefixMatch::Named& p : match.named_) n += pool_->ref_[p.page] == 0;
  return n + match.num_host_pages();  // one fresh device page per host-served slot
}

std::optional<LoadPlan> Coordinator::claim(std::span<BlockTable* const> tables,
                                           const PrefixMatch& match) {
  check_tables(tables);
  check_match(match);
  const size_t g = managers_.size();
  for (size_t i = 0; i < g; ++i)
    if (!tables[i]->is_fresh()) fail(at("tables", i), "is not fresh (empty and unbound)");
  // A page's int32 reference count has room for one more holder (2^31 - 1 at most).
  for (const PrefixMatch::Named& p : match.named_)
    if (pool_->ref_[p.page] == std::numeric_limits<int32_t>::max())
      fail("match", "holds page " + std::to_string(p.page) +
                        ", which 2^31 - 1 holders already share (its reference count is full)");
  if (match.num_tokens_ == 0) return std::nullopt;
  const auto loads = static_cast<size_t>(match.num_host_pages());
  std::optional<LoadPlan> plan;
  if (loads != 0) {
    int64_t need = static_cast<int64_t>(loads);  // blocks_consumed_by_claim, checked above
    for (const PrefixMatch::Named& p : match.named_) need += pool_->ref_[p.page] == 0;
    if (need > pool_->num_free())
      fail("match:", "its claim takes " + std::to_string(need) +
                         " free device pages, the pool has " + std::to_string(pool_->num_free()));
    plan.emplace();  // allocations (std::bad_alloc) before any change
    plan->coordinator_ = id_;
    plan->groups_.resize(loads);
    plan->slots_.resize(loads);
    plan->device_.resize(loads);
    plan->host_.resize(loads);
    plan->keys_.resize(loads);
    plan->parents_.resize(loads);
    plan->has_parent_.resize(loads);
    plan->reserve_tokens(loads, host_tokens(match));  // the loaded names' token ids
  }
  for (size_t i = 0; i < g; ++i)  // the only throw (std::bad_alloc): nothing changed yet
    tables[i]->slots_.reserve(static_cast<size_t>(match.pages(static_cast<int64_t>(i)).size()));
  if (plan) loads_.push_back({0, std::vector<int32_t>(loads), std::vector<BlockTable*>(g)});
  for (size_t i = 0; i < g; ++i) {
    BlockTable& t = *tables[i];
    const std::span<const int32_t> pages = match.pages(static_cast<int64_t>(i));
    const auto b = static_cast<int64_t>(pages.size());
    const int64_t R = resume_at(i, b);
    t.slots_.assign(pages.begin(), pages.end());
    t.tail_ = 0;
    // The holes below the claimed resume pages are never rescanned.
    t.floor_ = R < 0 ? 0 : std::max<int64_t>(0, b - R);
    t.real_ = R < 0 ? b : std::min(b, R);
    t.named_upto_ = b;
    t.pool_ = pool_;
    t.block_size_ = managers_[i].block_size();
    t.coordinator_ = id_;
  }
  for (const PrefixMatch::Named& p : match.named_) {
    pinned_[static_cast<size_t>(p.group)] += pool_->ref_[p.page] == 0;
    pool_->take_shared(p.page);
  }
  if (!plan) return plan;
  // The matched pages are out of the queue now, so this allocation cannot evict them.
  pool_->take(static_cast<int64_t>(loads), plan->device_.data());
  BlockPool& hb = *host_;
  for (size_t e = 0; e < loads; ++e) {
    const PrefixMatch::HostNamed& h = match.host_named_[e];
    const auto gi = static_cast<size_t>(h.group);
    tables[gi]->slots_[static_cast<size_t>(h.slot)] = plan->device_[e];  // a real slot
    ++pinned_[gi];
    hb.take_shared(h.page);
    plan->groups_[e] = h.group;
    plan->slots_[e] = static_cast<int32_t>(h.slot);
    plan->host_[e] = h.page;
    plan->keys_[e] = h.key;
    plan->parents_[e] = h.parent;
    plan->has_parent_[e] = h.has_parent;
    plan->add_tokens(e, hb.name_tokens(h.page));  // reserved above
  }
  PendingLoad& pending = loads_.back();
  pending.id = plan->id_ = next_load_++;
  std::copy(plan->host_.begin(), plan->host_.end(), pending.host_pages.begin());
  for (size_t i = 0; i < g; ++i) {
    pending.tables[i] = tables[i];
    tables[i]->load_ = plan->id_;
  }
  return plan;
}

}  // namespace livetail
