// Ops 0-4 and 8: the coordinator's acquire, admission, reclaim, free and decode step, and the
// single-group manager calls; the end of a request's pending load with its free.
#include "fuzz_world.h"

namespace livetail::fuzz {

void World::acquire(int r, int64_t n) {
  auto ts = request(r);
  if (split(r)) {
    expect_throw([&] { static_cast<void>(coord_.blocks_needed_for(ts, n)); });
    expect_throw([&] { coord_.acquire(ts, n); });
    return;
  }
  const int64_t need = coord_.blocks_needed_for(ts, n);
  int64_t manager_sum = 0;
  for (size_t g = 0; g < groups(); ++g)
    manager_sum += coord_.managers()[g].blocks_needed_for(*ts[g], n);
  CHECK(need == manager_sum);
  const Snapshot before = snapshot();
  if (coord_.acquire(ts, n)) {
    expect_exact_take(before, r, std::nullopt, need);
  } else {
    CHECK(need > before.num_free);  // a shortfall, and only then a failure
    expect_unchanged(before);
  }
}

void World::admit(int r, int64_t first, int64_t extra, bool reclaim_between) {
  auto ts = request(r);
  if (split(r)) {
    expect_throw([&] { static_cast<void>(coord_.blocks_needed_for_sequential(ts, first, extra)); });
    return;
  }
  const int64_t charge = coord_.blocks_needed_for_sequential(ts, first, extra);
  const int64_t chunk = coord_.blocks_needed_for(ts, first);
  CHECK(charge >= chunk);                 // the decode hold-back is never negative
  if (charge > pool_.num_free()) return;  // deferred
  const int64_t pinned0 = pool_.num_pinned();
  const Snapshot before = snapshot();
  CHECK(coord_.acquire(ts, first));
  expect_exact_take(before, r, std::nullopt, chunk);
  forget_evicted();
  check();
  int64_t peak = pool_.num_pinned() - pinned0;
  if (reclaim_between) reclaim(r, min_extent(r));
  const int64_t hold = coord_.blocks_needed_for(ts, extra);
  CHECK(hold == charge - chunk);  // exactly what the decode acquire takes
  const Snapshot mid = snapshot();
  CHECK(coord_.acquire(ts, extra));
  expect_exact_take(mid, r, std::nullopt, hold);
  peak = std::max(peak, pool_.num_pinned() - pinned0);
  CHECK(peak <= charge);
}

void World::reclaim(int r, int64_t f) {
  auto ts = request(r);
  if (loading(r) || split(r)) {  // reclaimed only once the load ends (semantics section 10)
    expect_throw([&] { coord_.reclaim_expired(ts, f); });
    return;
  }
  int64_t predicted = 0;
  for (size_t g = 0; g < groups(); ++g)
    predicted += coord_.managers()[g].blocks_reclaimable_at(*ts[g], f);
  const Snapshot before = snapshot();
  std::vector<int32_t> released;  // groups in order, each band in ascending slot order
  for (size_t g = 0; g < groups(); ++g) {
    const Manager& m = coord_.managers()[g];
    if (m.kind() == GroupKind::full) continue;
    const auto s = ts[g]->page_ids();
    const int64_t b = geometry::reclaim_bound(f, ts[g]->size(), m.sliding_window(), m.block_size());
    for (int64_t i = ts[g]->reclaim_floor(); i < b; ++i) {
      const int32_t p = s[static_cast<size_t>(i)];
      if (p != 0 && pool_.ref_count(p) == 1) released.push_back(p);
    }
  }
  CHECK(coord_.reclaim_expired(ts, f) == predicted);
  CHECK(static_cast<int64_t>(released.size()) == predicted);
  expect_queue(before, released);
  for (size_t g = 0; g < groups(); ++g) {
    const Manager& m = coord_.managers()[g];
    if (m.kind() == GroupKind::full) continue;
    const int64_t b = geometry::reclaim_bound(f, ts[g]->size(), m.sliding_window(), m.block_size());
    for (int64_t i = 0; i < b; ++i) CHECK(ts[g]->page_ids()[static_cast<size_t>(i)] == 0);
    CHECK(ts[g]->reclaim_floor() ==
              std::max(before.tables[static_cast<size_t>(r) * groups() + g].floor, b) ||
          ts[g]->size() == 0);
  }
}

void World::free_request(int r) {
  auto ts = request(r);
  if (split(r)) {
    expect_throw([&] { coord_.free(ts); });
    return;
  }
  const Snapshot before = snapshot();
  std::vector<int32_t> released;  // groups in order, each table last slot first
  for (BlockTable* t : ts) {
    const auto s = t->page_ids();
    for (size_t i = s.size(); i-- > 0;)
      if (s[i] != 0 && pool_.ref_count(s[i]) == 1) released.push_back(s[i]);
  }
  CHECK(coord_.free(ts) == static_cast<int64_t>(released.size()));
  for (BlockTable* t : ts) CHECK(t->is_fresh() && t->tail_available() == 0 && t->named_upto() == 0);
  expect_queue(before, released);
  // A pending load ends with its request: its host pins drop, the plan last first.
  const auto& load = loads_[static_cast<size_t>(r)];
  if (host_)
    expect_host_queue(before, load ? reversed(load->plan.host_pages()) : std::vector<int32_t>{});
  end_freed_load(r);
}

void World::end_freed_load(int r) {
  auto& load = loads_[static_cast<size_t>(r)];
  if (!load) return;
  CHECK(coord_.load_state(load->plan) == PlanState::aborted);
  ended_loads_.push_back(std::move(load->plan));
  if (ended_loads_.size() > 4) ended_loads_.pop_front();
  load.reset();
}

// Single-group calls: the only path to tables of one request with different extents.
void World::group_op(int r, size_t g, uint8_t what, uint8_t arg) {
  BlockTable& t = tables_[static_cast<size_t>(r)][g];
  const Manager& m = coord_.managers()[g];
  const Snapshot before = snapshot();
  if (what % 3 != 0 && loading(r)) {  // only the coordinator's free ends a load
    if (what % 3 == 1)
      expect_throw([&] { m.reclaim_expired(pool_, t, t.extent()); });
    else
      expect_throw([&] { m.free(pool_, t); });
    return;
  }
  switch (what % 3) {
    case 0: {
      const int64_t n = std::min(tokens(arg, r), kMaxTokens - t.extent());
      const int64_t need = m.blocks_needed_for(t, n);
      if (m.acquire(pool_, t, n)) {
        expect_exact_take(before, r, g, need);
        manager_net_[g] += need;
      } else {
        CHECK(need > before.num_free);
        expect_unchanged(before);
      }
      break;
    }
    case 1: {
      const int64_t f = arg < 128 ? t.extent() : std::max<int64_t>(0, t.extent() - arg % 16);
      const int64_t predicted = m.blocks_reclaimable_at(t, f);
      CHECK(m.reclaim_expired(pool_, t, f) == predicted);
      manager_net_[g] -= predicted;
      break;
    }
    default: {
      int64_t last = 0;
      for (int32_t p : t.page_ids()) last += p != 0 && pool_.ref_count(p) == 1;
      CHECK(m.free(pool_, t) == last);
      manager_net_[g] -= last;
      CHECK(t.is_fresh());
    }
  }
}

void World::decode_step() {
  std::vector<BlockTable*> ts;
  const bool refused = any_loading();  // a table with a pending load is not reclaimed
  std::vector<int64_t> fronts;         // the new token included: the reclaim runs after the acquire
  for (int r = 0; r < kRequests; ++r) {
    if (max_extent(r) >= kMaxTokens) return;  // keeps every table under the key limit
    for (BlockTable* t : request(r)) ts.push_back(t);
    fronts.push_back(min_extent(r) + 1);
  }
  if (refused || any_split()) {
    expect_throw([&] { coord_.decode_step(ts, fronts); });
    return;
  }
  const Snapshot before = snapshot();
  std::vector<int64_t> extents;
  for (BlockTable* t : ts) extents.push_back(t->extent());
  const DecodeResult res = coord_.decode_step(ts, fronts);
  CHECK(res.stepped >= 0 && res.stepped <= kRequests && res.reclaimed >= 0);
  const Snapshot after = snapshot();
  const auto done = static_cast<size_t>(res.stepped) * groups();
  for (size_t i = 0; i < done; ++i) CHECK(ts[i]->extent() == extents[i] + 1);
  for (size_t i = done; i < ts.size(); ++i)
    CHECK(after.tables[i] == before.tables[i]);  // the short request and every later one
  if (res.stepped < kRequests) {                 // it stopped at a real shortfall
    int64_t need = 0;
    for (size_t g = 0; g < groups(); ++g)
      need += coord_.managers()[g].blocks_needed_for(*ts[done + g], 1);
    CHECK(need > pool_.num_free());
  }
}

}  // namespace livetail::fuzz
