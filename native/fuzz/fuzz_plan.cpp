// Op 12: plan_step over the three requests, checked against an independent count, then
// apply_step (or a pool change first, after which the plan is stale).
#include "fuzz_world.h"

#include <map>

namespace livetail::fuzz {

namespace {

// Pages whose every reference is held by the tables of requests order[from..]: what
// preempting them puts back in the queue (semantics section 9).
int64_t released_by(const BlockPool& pool, const std::vector<std::vector<BlockTable*>>& reqs,
                    size_t from) {
  std::map<int32_t, int32_t> held;
  for (size_t q = from; q < reqs.size(); ++q)
    for (const BlockTable* t : reqs[q])
      for (int32_t p : t->page_ids())
        if (p != 0) ++held[p];
  int64_t n = 0;
  for (const auto& [p, count] : held) n += count == pool.ref_count(p);
  return n;
}

}  // namespace

void World::plan_and_apply(uint8_t a, uint8_t b) {
  std::vector<std::vector<BlockTable*>> reqs;  // priority order: a rotation of the requests
  std::vector<BlockTable*> ts;
  std::vector<int64_t> tokens, needs;
  for (int i = 0; i < kRequests; ++i) {
    const int r = (i + a) % kRequests;
    const int64_t choice[] = {0, 1, 9, 2 * coord_.lcm_block_size()};
    const int64_t n = std::min(choice[(b >> (2 * i)) & 3], kMaxTokens - max_extent(r));
    reqs.push_back(request(r));
    ts.insert(ts.end(), reqs.back().begin(), reqs.back().end());
    tokens.push_back(n);
    needs.push_back(split(r) ? 0 : coord_.blocks_needed_for(reqs.back(), n));
  }
  if (any_split()) {
    expect_throw([&] { static_cast<void>(coord_.plan_step(ts, tokens)); });
    return;
  }
  const Snapshot before = snapshot();
  StepPlan plan = coord_.plan_step(ts, tokens);
  expect_unchanged(before);  // read-only
  const auto k = static_cast<size_t>(plan.stepped());
  CHECK(plan.num_requests() == kRequests && k <= reqs.size());
  int64_t taken = 0;
  for (size_t q = 0; q < k; ++q) taken += needs[q];
  const int64_t released = released_by(pool_, reqs, k);
  CHECK(plan.pages_taken() == taken && plan.pages_released() == released);
  CHECK(taken <= before.num_free + released);  // the stepped prefix fits ...
  if (k < reqs.size())                         // ... and is the longest that does
    CHECK(taken + needs[k] > before.num_free + released_by(pool_, reqs, k + 1));
  CHECK(plan.free_after() == before.num_free + released - taken);
  CHECK(plan.top_fits() == (k > 0));
  if ((a & 0x80) && pool_.num_free() > 0) {  // a change since plan_step makes the plan stale
    pool_allocate(1);
    forget_evicted();
    check();
    expect_throw([&] { coord_.apply_step(plan); });
    return;
  }
  std::vector<int64_t> extents;
  for (const BlockTable* t : ts) extents.push_back(t->extent());
  const Snapshot applied = snapshot();
  coord_.apply_step(plan);
  CHECK(plan.applied() && pool_.num_free() == plan.free_after());
  // Preempted requests' loads ended with their free (lowest priority first).
  std::vector<int32_t> unpinned;
  for (size_t q = reqs.size(); q-- > k;) {
    const int r = (static_cast<int>(q) + a) % kRequests;
    const auto& load = loads_[static_cast<size_t>(r)];
    if (load)
      for (int32_t p : reversed(load->plan.host_pages())) unpinned.push_back(p);
    end_freed_load(r);
  }
  if (host_) expect_host_queue(applied, unpinned);
  for (size_t i = 0; i < ts.size(); ++i) {
    const size_t q = i / groups();
    if (q < k)
      CHECK(ts[i]->extent() == extents[i] + tokens[q]);
    else
      CHECK(ts[i]->is_fresh());
  }
  expect_throw([&] { coord_.apply_step(plan); });  // a plan applies once
}

}  // namespace livetail::fuzz
