// Counters and events for Python (semantics section 11): the pool's and a coordinator's
// stats() dicts and the pool's take_events(). Registered by binding.cpp.
#pragma once

#include <nanobind/nanobind.h>

#include "livetail/coordinator.h"
#include "livetail/pool.h"

namespace livetail::py {

// Every monotone counter and the gauges num_free, num_pinned, num_cached, num_cached_free,
// num_names, by name. O(1).
nanobind::dict pool_stats(const BlockPool& pool);
// The pool's stats plus "pinned_pages": the pages each group pins now, in group order.
nanobind::dict coordinator_stats(const Coordinator& c);
// The queued events in order, as (kind, tier, group, keys, parent, first_slot, token_ids)
// tuples (semantics sections 11-12), and
// an empty queue. Throws std::invalid_argument for a pool built without events.
nanobind::list take_events(BlockPool& pool);
// The same with the events' tier: "GPU" for the device pool, "CPU" for the host pool.
nanobind::list take_events_of_tier(BlockPool& pool, const char* tier);

}  // namespace livetail::py
