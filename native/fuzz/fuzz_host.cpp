// Ops 13, 14, 16 and 17: the host tier (semantics section 10): offload plans, their
// completion or abort, complete_load, and the host calls that must throw.
#include "fuzz_world.h"

#include <set>

namespace livetail::fuzz {

// plan_offload of request r's tables up to n tokens; `end` completes (1) or aborts (2) it at
// once, else it stays pending for a later call.
void World::offload(int r, int64_t n, uint8_t end) {
  auto ts = request(r);
  if (!host_) {
    expect_throw([&] { static_cast<void>(coord_.plan_offload(ts, n)); });
    return;
  }
  if (offloads_.size() >= 8) return;  // enough copies in flight
  if (split(r)) {
    expect_throw([&] { static_cast<void>(coord_.plan_offload(ts, n)); });
    return;
  }
  // Reachable pages up to n, computed from the semantics: a full group's named slots below
  // n / B; a sliding or state group's named slots in [b - R, b) for every lcm multiple
  // b * B <= n. Planned: those whose name the host lacks, group then slot order.
  std::set<Name> on_host;
  for (const auto& name : host_names_)
    if (name) on_host.insert(*name);
  std::vector<std::array<int32_t, 3>> want;  // group, slot, device page
  for (size_t g = 0; g < groups(); ++g) {
    const int64_t B = coord_.managers()[g].block_size(), R = resume(g);
    std::set<int64_t> slots;
    if (R < 0)
      for (int64_t j = 0; j < n / B; ++j) slots.insert(j);
    else
      for (int64_t T = coord_.lcm_block_size(); T <= n; T += coord_.lcm_block_size())
        for (int64_t j = std::max<int64_t>(0, T / B - R); j < T / B; ++j) slots.insert(j);
    for (int64_t j : slots) {
      const int32_t p = ts[g]->page_ids()[static_cast<size_t>(j)];
      const auto& name = dev_names_[static_cast<size_t>(p)];
      if (p != 0 && name && !on_host.contains(*name))
        want.push_back({static_cast<int32_t>(g), static_cast<int32_t>(j), p});
    }
  }
  const Snapshot before = snapshot();
  std::optional<OffloadPlan> plan = coord_.plan_offload(ts, n);
  const auto k = static_cast<int64_t>(want.size());
  if (!plan) {  // all or nothing: the host pool is short
    CHECK(k > static_cast<int64_t>(before.host_queue.size()));
    expect_unchanged(before);
    return;
  }
  CHECK(plan->state() == PlanState::pending && plan->num_pages() == k);
  for (size_t e = 0; e < want.size(); ++e) {
    CHECK(plan->groups()[e] == want[e][0] && plan->slots()[e] == want[e][1]);
    CHECK(plan->device_pages()[e] == want[e][2]);
    // One more device reference per copy; the host pages are the host queue's front.
    CHECK(pool_.ref_count(want[e][2]) == before.refs[static_cast<size_t>(want[e][2])] + 1);
    const int32_t hp = plan->host_pages()[e];
    CHECK(hp == before.host_queue[e] && host_->ref_count(hp) == 1 && !host_->is_cached(hp));
  }
  CHECK(queue() == before.queue &&
        before.host_queue.size() - copy_queue(*host_).size() == want.size());
  offloads_.push_back(std::move(*plan));
  forget_evicted();  // the host allocation may evict host names
  check();
  if (end == 1 || end == 2) end_offload(offloads_.size() - 1, end == 1);
}

// Completes or aborts pending plan i.
void World::end_offload(size_t i, bool complete) {
  OffloadPlan& plan = offloads_[i];
  const Snapshot before = snapshot();
  if (complete)
    coord_.complete_offload(plan);
  else
    coord_.abort_offload(plan);
  CHECK(plan.state() == (complete ? PlanState::completed : PlanState::aborted));
  // The device references drop, last entry first; the host pages go back, last page first:
  // named to the host queue's back on completion, unnamed to its front on abort.
  std::vector<int32_t> released;
  for (int32_t p : reversed(plan.device_pages()))
    if (before.refs[static_cast<size_t>(p)] == 1) released.push_back(p);
  if (complete)
    for (int64_t e = 0; e < plan.num_pages(); ++e) {
      const int32_t hp = plan.host_pages()[static_cast<size_t>(e)];
      CHECK(!host_names_[static_cast<size_t>(hp)]);
      host_names_[static_cast<size_t>(hp)] =
          dev_names_[static_cast<size_t>(plan.device_pages()[static_cast<size_t>(e)])];
    }
  expect_queue(before, released);
  expect_host_queue(before, reversed(plan.host_pages()));
  CHECK(host_->pages_offloaded() - before.host_offloaded == (complete ? plan.num_pages() : 0));
  CHECK(snapshot().tables == before.tables);
  ended_offloads_.push_back(std::move(plan));
  if (ended_offloads_.size() > 4) ended_offloads_.pop_front();
  offloads_.erase(offloads_.begin() + static_cast<std::ptrdiff_t>(i));
  // A plan ends once.
  OffloadPlan& done = ended_offloads_.back();
  expect_throw([&] { coord_.complete_offload(done); });
  expect_throw([&] { coord_.abort_offload(done); });
}

// complete_load of request r's pending load; without one, of an ended load (which throws).
void World::complete_load(int r, bool twice) {
  auto& load = loads_[static_cast<size_t>(r)];
  if (!load) {
    LoadPlan none;
    if (!host_)
      expect_throw([&] { coord_.complete_load(none); });
    else if (!ended_loads_.empty())
      expect_throw([&] { coord_.complete_load(ended_loads_.back()); });
    return;
  }
  LoadPlan& plan = load->plan;
  const Snapshot before = snapshot();
  coord_.complete_load(plan);
  CHECK(coord_.load_state(plan) == PlanState::completed);
  // Exactly the plan's device pages take names, unnamed until now: their slots' keys. The
  // host pins drop.
  for (int64_t e = 0; e < plan.num_pages(); ++e) {
    const auto i = static_cast<size_t>(e);
    const int32_t p = plan.device_pages()[i];
    const auto g = static_cast<size_t>(plan.groups()[i]);
    CHECK(tables_[static_cast<size_t>(r)][g].page_ids()[static_cast<size_t>(plan.slots()[i])] == p);
    CHECK(!before.cached[static_cast<size_t>(p)] && pool_.is_cached(p));
    dev_names_[static_cast<size_t>(p)] =
        Name{static_cast<int32_t>(g), slot_key(load->doc, g, plan.slots()[i])};
  }
  CHECK(pool_.num_cached() - before.num_cached == plan.num_pages());
  CHECK(host_->pages_loaded() - before.host_loaded == plan.num_pages());
  CHECK(queue() == before.queue && snapshot().refs == before.refs);
  expect_host_queue(before, reversed(plan.host_pages()));
  for (const BlockTable& t : tables_[static_cast<size_t>(r)]) CHECK(!t.has_pending_load());
  ended_loads_.push_back(std::move(plan));
  if (ended_loads_.size() > 4) ended_loads_.pop_front();
  load.reset();
  if (twice) {
    forget_evicted();
    check();
    expect_throw([&] { coord_.complete_load(ended_loads_.back()); });
  }
}

void World::host_misuse(int r, uint8_t what) {
  auto ts = request(r);
  switch (what % 7) {
    case 0:  // a plan ends once
      if (!ended_offloads_.empty())
        expect_throw([&] { coord_.complete_offload(ended_offloads_.front()); });
      break;
    case 1:
      if (!ended_offloads_.empty())
        expect_throw([&] { coord_.abort_offload(ended_offloads_.front()); });
      break;
    case 2:
      if (!ended_loads_.empty()) expect_throw([&] { coord_.complete_load(ended_loads_.front()); });
      break;
    case 3: {  // a plan of another coordinator
      auto other = scratch();
      std::optional<OffloadPlan> foreign = other_coord_.plan_offload(other, 0);
      CHECK(foreign && foreign->num_pages() == 0);
      expect_throw([&] { coord_.complete_offload(*foreign); });
      expect_throw([&] { coord_.abort_offload(*foreign); });
      break;
    }
    case 4: {
      LoadPlan foreign;
      expect_throw([&] { coord_.complete_load(foreign); });
      break;
    }
    case 5:
      expect_throw([&] { static_cast<void>(coord_.plan_offload(ts, max_extent(r) + 1)); });
      expect_throw([&] { static_cast<void>(coord_.plan_offload(ts, -1)); });
      break;
    default: {  // a coordinator without host
      auto other = scratch();
      const Snapshot before = snapshot();
      bool thrown = false;
      try {
        static_cast<void>(no_host_.plan_offload(other, 0));
      } catch (const std::invalid_argument&) {
        thrown = true;
      }
      CHECK(thrown);
      expect_unchanged(before);
    }
  }
}

}  // namespace livetail::fuzz
