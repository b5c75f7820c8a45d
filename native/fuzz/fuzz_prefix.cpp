// Ops 5-7: naming (cache_full_blocks), match_prefix across tiers and claim, a kept match's
// claim; a claim's pending load is kept for the host ops.
#include "fuzz_world.h"

#include <set>

namespace livetail::fuzz {

void World::keep_load(int r, LoadPlan plan, int doc) {
  CHECK(!loading(r));  // a claim needs fresh tables: their earlier load ended with the free
  CHECK(coord_.load_state(plan) == PlanState::pending);
  loads_[static_cast<size_t>(r)] = Load{std::move(plan), doc};
}

void World::cache(int r, int doc, int64_t n, int64_t fewer_keys) {
  auto ts = request(r);
  const int64_t base = coord_.base_block_size();
  const auto& all = doc_keys(doc, base);
  const int64_t nkeys = std::max<int64_t>(0, n / base - fewer_keys);
  const std::span<const Key> keys(all.data(), static_cast<size_t>(nkeys));
  if (split(r)) {
    expect_throw([&] { coord_.cache_full_blocks(ts, keys, n); });
    return;
  }
  Snapshot before = snapshot();
  const int64_t named = coord_.cache_full_blocks(ts, keys, n);
  CHECK(pool_.num_cached() - before.num_cached == named);
  // The pages newly named carry their slot's key.
  int64_t seen = 0;
  for (size_t g = 0; g < groups(); ++g) {
    const auto slots = ts[g]->page_ids();
    for (size_t j = 0; j < slots.size(); ++j) {
      const int32_t p = slots[j];
      if (p == 0 || before.cached[static_cast<size_t>(p)] || !pool_.is_cached(p)) continue;
      CHECK(!dev_names_[static_cast<size_t>(p)]);
      dev_names_[static_cast<size_t>(p)] =
          Name{static_cast<int32_t>(g), slot_key(doc, g, static_cast<int64_t>(j))};
      ++seen;
    }
  }
  CHECK(seen == named);
  // A page whose load is pending holds no content yet: it takes its name at complete_load.
  for (const auto& load : loads_)
    if (load)
      for (int64_t e = 0; e < load->plan.num_pages(); ++e)
        CHECK(!pool_.is_cached(load->plan.device_pages()[static_cast<size_t>(e)]));
  // Naming moves no page: only the names and the tables' naming cursors changed.
  Snapshot after = snapshot();
  for (auto* s : {&before, &after}) {
    s->cached.clear();
    s->num_cached = 0;
    for (auto& t : s->tables) t.named_upto = 0;
  }
  CHECK(after == before);
}

void World::match_and_claim(int r, int doc, int64_t n, bool keep, bool complete) {
  const int64_t base = coord_.base_block_size();
  const auto& all = doc_keys(doc, base);
  const std::span<const Key> keys(all.data(), static_cast<size_t>(n / base));
  const Snapshot before = snapshot();
  PrefixMatch match = coord_.match_prefix(keys);
  const int64_t consumed = coord_.blocks_consumed_by_claim(match);
  expect_unchanged(before);  // read-only
  const int64_t T = match.num_tokens(), L = coord_.lcm_block_size();
  CHECK(T >= 0 && T % L == 0 && T <= n / base * base);
  CHECK(match.num_groups() == coord_.num_groups());
  // A slot is present when a device or host page carries its name (semantics section 10).
  std::set<Name> on_device, on_host;
  for (const auto& name : dev_names_)
    if (name) on_device.insert(*name);
  for (const auto& name : host_names_)
    if (name) on_host.insert(*name);
  auto present = [&](size_t g, int64_t j) {
    const Name name{static_cast<int32_t>(g), slot_key(doc, g, j)};
    return on_device.contains(name) || on_host.contains(name);
  };
  // T is the greatest supported lcm multiple: no boundary above it (up to the keys) is.
  std::vector<int64_t> prefix(groups(), 0);  // a full group's longest present prefix
  const int64_t top = static_cast<int64_t>(keys.size()) * base / L;
  for (size_t g = 0; g < groups(); ++g)
    if (resume(g) < 0)
      while (prefix[g] < top * L / coord_.managers()[g].block_size() && present(g, prefix[g]))
        ++prefix[g];
  for (int64_t t = T / L + 1; t <= top; ++t) {
    bool supported = true;
    for (size_t g = 0; g < groups() && supported; ++g) {
      const int64_t b = t * L / coord_.managers()[g].block_size(), R = resume(g);
      if (R < 0) supported = b <= prefix[g];
      for (int64_t j = std::max<int64_t>(0, b - R); R >= 0 && j < b && supported; ++j)
        supported = present(g, j);
    }
    CHECK(!supported);
  }
  int64_t free_matched = 0, served = 0;
  for (size_t g = 0; g < groups(); ++g) {
    const auto pages = match.pages(static_cast<int64_t>(g));
    const auto host_pages = match.host_pages(static_cast<int64_t>(g));
    const int64_t b = T / coord_.managers()[g].block_size();
    CHECK(static_cast<int64_t>(pages.size()) == b && static_cast<int64_t>(host_pages.size()) == b);
    const int64_t R = resume(g) < 0 ? b : resume(g);
    for (int64_t j = 0; j < b; ++j) {
      const int32_t p = pages[static_cast<size_t>(j)], hp = host_pages[static_cast<size_t>(j)];
      // Real exactly where the group needs it, from one tier, the device preferred.
      CHECK(((p != 0) || (hp != 0)) == (j >= b - R) && !(p != 0 && hp != 0));
      const Name name{static_cast<int32_t>(g), slot_key(doc, g, j)};
      if (p != 0) {
        CHECK(dev_names_[static_cast<size_t>(p)] == name);
        free_matched += pool_.ref_count(p) == 0;
      }
      if (hp != 0) {
        CHECK(host_ && host_names_[static_cast<size_t>(hp)] == name && !on_device.contains(name));
        ++served;
      }
    }
  }
  CHECK(match.num_host_pages() == served);
  CHECK(consumed == free_matched + served);  // one fresh device page per host-served slot
  auto ts = request(r);
  bool fresh = true;
  for (BlockTable* t : ts) fresh &= t->is_fresh();
  if (!fresh || consumed > before.num_free) {  // a claim with loads is all-or-nothing
    CHECK(!fresh || served > 0);  // device pages alone are free or in use: always claimable
    expect_throw([&] { static_cast<void>(coord_.claim(ts, match)); });
  } else {
    std::optional<LoadPlan> plan = coord_.claim(ts, match);
    CHECK(before.num_free - pool_.num_free() == consumed);
    CHECK(plan.has_value() == (served > 0) && (!plan || plan->num_pages() == served));
    // The queue lost the matched free pages, then its front: one page per load.
    std::vector<int32_t> rest;
    for (int32_t p : before.queue) {
      bool matched = false;
      for (size_t g = 0; g < groups(); ++g)
        matched |= std::ranges::find(match.pages(static_cast<int64_t>(g)), p) !=
                   match.pages(static_cast<int64_t>(g)).end();
      if (!matched) rest.push_back(p);
    }
    CHECK(static_cast<int64_t>(rest.size()) == before.num_free - free_matched);
    const std::vector<int32_t> after = queue();
    CHECK(std::equal(rest.begin() + served, rest.end(), after.begin(), after.end()));
    size_t e = 0;  // the plan's entries, group then slot order
    for (size_t g = 0; g < groups(); ++g) {
      const auto pages = match.pages(static_cast<int64_t>(g));
      const auto host_pages = match.host_pages(static_cast<int64_t>(g));
      const BlockTable& t = *ts[g];
      const int64_t b = static_cast<int64_t>(pages.size());
      CHECK(t.size() == b && t.tail_available() == 0);
      const int64_t floor = resume(g) < 0 ? 0 : std::max<int64_t>(0, b - resume(g));
      CHECK(t.reclaim_floor() == (b == 0 ? 0 : floor));
      for (int64_t j = 0; j < b; ++j) {
        const int32_t p = pages[static_cast<size_t>(j)], hp = host_pages[static_cast<size_t>(j)];
        const int32_t slot = t.page_ids()[static_cast<size_t>(j)];
        if (hp == 0) {
          CHECK(slot == p);
          if (p != 0) CHECK(pool_.ref_count(p) == before.refs[static_cast<size_t>(p)] + 1);
          continue;
        }
        // A loaded page: a fresh device page in a real slot, the queue's next one.
        CHECK(plan && e < static_cast<size_t>(plan->num_pages()));
        CHECK(plan->groups()[e] == static_cast<int32_t>(g) && plan->slots()[e] == j);
        CHECK(plan->host_pages()[e] == hp && plan->device_pages()[e] == slot && slot != 0);
        CHECK(slot == rest[e] && pool_.ref_count(slot) == 1 && !pool_.is_cached(slot));
        CHECK(host_->ref_count(hp) == before.host_refs[static_cast<size_t>(hp)] + 1);
        ++e;
      }
    }
    CHECK(!plan || e == static_cast<size_t>(plan->num_pages()));
    if (plan) {
      keep_load(r, std::move(*plan), doc);
      forget_evicted();
      check();
      if (complete) complete_load(r, false);
    }
  }
  if (keep) {
    saved_ = std::move(match);
    saved_doc_ = doc;
  }
}

// A match kept across other calls: valid, stale (an allocation evicted a matched page) or
// claimed into tables that are no longer fresh. Either it succeeds exactly or changes nothing.
void World::claim_saved(int r) {
  if (!saved_) return;
  auto ts = request(r);
  const Snapshot before = snapshot();
  int64_t consumed = -1;
  try {
    consumed = coord_.blocks_consumed_by_claim(*saved_);
  } catch (const std::invalid_argument&) {
    expect_unchanged(before);
  }
  std::optional<LoadPlan> plan;
  try {
    plan = coord_.claim(ts, *saved_);
  } catch (const std::invalid_argument&) {
    expect_unchanged(before);
    return;
  }
  CHECK(consumed >= 0);  // a claim succeeds only where the consumed query does
  CHECK(before.num_free - pool_.num_free() == consumed);
  CHECK(plan.has_value() == (saved_->num_host_pages() > 0 && saved_->num_tokens() > 0));
  if (plan) keep_load(r, std::move(*plan), saved_doc_);
}

}  // namespace livetail::fuzz
