#include "stats.h"

#include <stdexcept>

namespace nb = nanobind;

namespace livetail::py {

namespace {

nb::bytes key_bytes(const Key& k) { return nb::bytes(reinterpret_cast<const char*>(k.data()), k.size()); }

}  // namespace

nb::dict pool_stats(const BlockPool& pool) {
  const BlockPool::Stats& s = pool.stats();
  nb::dict d;
  d["pages_allocated"] = s.pages_allocated;
  d["pages_released"] = s.pages_released;
  d["pages_named"] = s.pages_named;
  d["pages_evicted"] = s.pages_evicted;
  d["names_stored"] = s.names_stored;
  d["names_removed"] = s.names_removed;
  d["match_calls"] = s.match_calls;
  d["match_tokens_queried"] = s.match_tokens_queried;
  d["match_tokens_matched"] = s.match_tokens_matched;
  d["pages_claimed"] = s.pages_claimed;
  d["pages_claimed_free"] = s.pages_claimed_free;
  d["num_free"] = pool.num_free();
  d["num_pinned"] = pool.num_pinned();
  d["num_cached"] = pool.num_cached();
  d["num_cached_free"] = pool.num_cached_free();
  d["num_names"] = pool.num_names();
  return d;
}

nb::dict coordinator_stats(const Coordinator& c) {
  nb::dict d = pool_stats(c.pool());
  nb::list pinned;
  for (int64_t g = 0; g < c.num_groups(); ++g) pinned.append(c.pinned_pages(g));
  d["pinned_pages"] = pinned;
  return d;
}

nb::list take_events(BlockPool& pool) { return take_events_of_tier(pool, "GPU"); }

nb::list take_events_of_tier(BlockPool& pool, const char* tier) {
  if (!pool.events_enabled())
    throw std::invalid_argument("take_events: the pool was built with events=False");
  nb::list out;
  const std::vector<Key>& keys = pool.event_keys();
  const std::vector<uint32_t>& tokens = pool.event_tokens();
  for (const BlockPool::Event& e : pool.events()) {
    nb::list ks;
    for (size_t i = 0; i < e.key_count; ++i) ks.append(key_bytes(keys[e.key_begin + i]));
    nb::list ts;
    for (size_t i = 0; i < e.token_count; ++i) ts.append(tokens[e.token_begin + i]);
    const bool stored = e.kind == BlockPool::EventKind::stored;
    const char* kind = stored                                      ? "stored"
                       : e.kind == BlockPool::EventKind::removed ? "removed"
                                                                   : "cleared";
    nb::object parent = stored && e.has_parent ? nb::object(key_bytes(e.parent)) : nb::none();
    nb::object first = stored ? nb::object(nb::int_(e.first_slot)) : nb::none();
    out.append(
        nb::make_tuple(kind, tier, e.group, nb::tuple(ks), parent, first, nb::tuple(ts)));
  }
  pool.clear_events();
  return out;
}

}  // namespace livetail::py
