// Host tier (semantics section 10): offload plans, load completion, loads aborted by free.
// Claim with loads and the match across tiers live with the device versions (coordinator.cpp).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "livetail/coordinator.h"
#include "fail.h"

namespace livetail {

using detail::fail;

namespace {

const char* state_name(PlanState s) {
  return s == PlanState::completed ? "completed" : s == PlanState::aborted ? "aborted" : "pending";
}

}  // namespace

void Coordinator::need_host(const char* what) const {
  if (host_ == nullptr) fail(std::string(what) + ":", "the coordinator has no host pool");
}

void Coordinator::check_plan(const CopyPlan& plan, PlanState state, const char* what) const {
  need_host(what);
  if (plan.coordinator_ != id_) fail("plan", "comes from another coordinator");
  if (state != PlanState::pending)
    fail("plan", std::string("was ") + state_name(state) + " already");
}

std::optional<OffloadPlan> Coordinator::plan_offload(std::span<BlockTable* const> tables,
                                                     int64_t num_tokens, int64_t max_pages) {
  need_host("plan_offload");
  Manager::check_count(num_tokens, "num_tokens");
  if (max_pages < -1) Manager::check_count(max_pages, "max_pages");
  check_tables_outlined(tables);
  for (size_t i = 0; i < managers_.size(); ++i) {
    const BlockTable& t = *tables[i];
    const int64_t extent = geometry::extent(t.size(), t.tail_, managers_[i].block_size());
    if (num_tokens > extent)
      fail("num_tokens", "= " + std::to_string(num_tokens) + " is past the table's extent " +
                             std::to_string(extent));
  }
  const BlockPool& hb = *host_;
  OffloadPlan plan;
  plan.coordinator_ = id_;
  auto add = [&](size_t i, const int32_t* s, int64_t j) {
    const int32_t p = s[j];
    if (p == 0 || !pool_->is_cached(p)) return;
    const BlockPool::NameRec& name =
        pool_->recs_[static_cast<size_t>(pool_->page_name_[static_cast<size_t>(p)].rec)];
    if (hb.find_name(name.group, name.key) != 0) return;  // the host holds it already
    const int32_t prev = j > 0 ? s[j - 1] : 0;
    const bool has_parent = prev != 0 && pool_->is_cached(prev);
    plan.groups_.push_back(static_cast<int32_t>(i));
    plan.slots_.push_back(static_cast<int32_t>(j));
    plan.device_.push_back(p);
    plan.keys_.push_back(name.key);
    plan.has_parent_.push_back(has_parent);
    plan.parents_.push_back(
        has_parent
            ? pool_->recs_[static_cast<size_t>(pool_->page_name_[static_cast<size_t>(prev)].rec)]
                  .key
            : Key{});
  };
  for (size_t i = 0; i < managers_.size(); ++i) {
    const int32_t* s = tables[i]->slots_.data();
    const int64_t B = managers_[i].block_size();
    const int64_t R = resume(i);
    if (R < 0) {
      for (int64_t j = 0; j < num_tokens / B; ++j) add(i, s, j);
      continue;
    }
    // The R slots behind every aligned boundary up to num_tokens, each once, ascending.
    int64_t next = 0;
    for (int64_t T = alignment_; T <= num_tokens; T += alignment_) {
      const int64_t b = T / B;
      for (int64_t j = std::max(next, b - resume_at(i, b)); j < b; ++j) add(i, s, j);
      next = std::max(next, b);
    }
  }
  if (max_pages >= 0 && plan.num_pages() > max_pages) keep_first(plan, max_pages);
  const int64_t k = plan.num_pages();
  if (k > host_->num_free()) return std::nullopt;
  size_t ntok = 0;  // the copied names' token ids (section 12), copied with them
  for (const int32_t p : plan.device_) ntok += pool_->name_tokens(p).size();
  plan.reserve_tokens(plan.device_.size(), ntok);
  for (size_t e = 0; e < plan.device_.size(); ++e)
    plan.add_tokens(e, pool_->name_tokens(plan.device_[e]));
  plan.host_.resize(static_cast<size_t>(k));
  host_->take(k, plan.host_.data());
  for (const int32_t p : plan.device_) ++pool_->ref_[p];  // the copy's reference
  pool_->version_ += k != 0;
  return plan;
}

// Keeps the first `max_pages` entries of the plan in write-back order (spec/slots.py
// offload_rank: the aligned boundary a slot first serves, then group, then slot), in the
// plan's group-then-slot order.
void Coordinator::keep_first(OffloadPlan& plan, int64_t max_pages) const {
  const size_t k = plan.groups_.size();
  std::vector<size_t> order(k);
  for (size_t e = 0; e < k; ++e) order[e] = e;
  auto rank = [&](size_t e) {
    const int64_t q = alignment_ / managers_[static_cast<size_t>(plan.groups_[e])].block_size();
    return plan.slots_[e] / q + 1;
  };
  // Entries are in group then slot order already: a stable sort by rank breaks ties so.
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rank(a) < rank(b); });
  std::vector<uint8_t> kept(k, 0);
  for (size_t i = 0; i < static_cast<size_t>(max_pages); ++i) kept[order[i]] = 1;
  size_t out = 0;
  for (size_t e = 0; e < k; ++e) {
    if (!kept[e]) continue;
    plan.groups_[out] = plan.groups_[e];
    plan.slots_[out] = plan.slots_[e];
    plan.device_[out] = plan.device_[e];
    plan.keys_[out] = plan.keys_[e];
    plan.has_parent_[out] = plan.has_parent_[e];
    plan.parents_[out] = plan.parents_[e];
    ++out;
  }
  plan.groups_.resize(out);
  plan.slots_.resize(out);
  plan.device_.resize(out);
  plan.keys_.resize(out);
  plan.has_parent_.resize(out);
  plan.parents_.resize(out);
}

void Coordinator::release_offloaded(const CopyPlan& plan) {
  // A page whose request was freed meanwhile re-enters the queue here: no group pins it now.
  BlockPool::Releaser rel(*pool_);
  for (size_t e = plan.device_.size(); e-- > 0;)
    if (rel.release(plan.device_[e])) --pinned_[static_cast<size_t>(plan.groups_[e])];
  rel.done();
}

void Coordinator::complete_offload(OffloadPlan& plan) {
  check_plan(plan, plan.state_, "complete_offload");
  BlockPool& hb = *host_;
  // The only throws (std::bad_alloc): nothing changed yet.
  const auto ntok = static_cast<int64_t>(plan.tokens_.size());
  hb.reserve_names(plan.num_pages(), ntok);
  if (hb.events_enabled()) hb.reserve_events(plan.num_pages(), ntok);
  for (size_t e = 0; e < plan.host_.size(); ++e) {
    const std::span<const uint32_t> t = plan.entry_tokens(e);
    const int r = hb.set_name(plan.host_[e], plan.groups_[e], plan.keys_[e], t.data(),
                              static_cast<uint32_t>(t.size()));
    if (r == 2 && hb.events_enabled())
      hb.note_stored(plan.groups_[e], plan.slots_[e], plan.keys_[e],
                     plan.has_parent_[e] ? &plan.parents_[e] : nullptr, t, !t.empty());
  }
  hb.end_event_op();
  host_->offloaded_ += plan.num_pages();
  // Named host pages join the back of the host queue, the plan's last page first.
  hb.free(plan.host_);
  release_offloaded(plan);
  plan.state_ = PlanState::completed;
}

void Coordinator::abort_offload(OffloadPlan& plan) {
  check_plan(plan, plan.state_, "abort_offload");
  host_->free(plan.host_);  // unnamed: the front of the host queue
  release_offloaded(plan);
  plan.state_ = PlanState::aborted;
}

PlanState Coordinator::load_state(const LoadPlan& plan) const noexcept {
  if (plan.state_ != PlanState::pending) return plan.state_;
  for (const PendingLoad& l : loads_)
    if (l.id == plan.id_ && plan.coordinator_ == id_) return PlanState::pending;
  return plan.coordinator_ == id_ ? PlanState::aborted : PlanState::pending;
}

void Coordinator::complete_load(LoadPlan& plan) {
  check_plan(plan, plan.coordinator_ == id_ ? load_state(plan) : plan.state_, "complete_load");
  // The only throws (std::bad_alloc).
  const auto ntok = static_cast<int64_t>(plan.tokens_.size());
  pool_->reserve_names(plan.num_pages(), ntok);
  const bool events = pool_->events_enabled();
  if (events) pool_->reserve_events(plan.num_pages(), ntok);
  for (size_t e = 0; e < plan.device_.size(); ++e) {
    const std::span<const uint32_t> t = plan.entry_tokens(e);
    const int r = pool_->set_name(plan.device_[e], plan.groups_[e], plan.keys_[e], t.data(),
                                  static_cast<uint32_t>(t.size()));
    if (r == 2 && events)
      pool_->note_stored(plan.groups_[e], plan.slots_[e], plan.keys_[e],
                         plan.has_parent_[e] ? &plan.parents_[e] : nullptr, t, !t.empty());
  }
  pool_->end_event_op();
  host_->loaded_ += plan.num_pages();
  host_->free(plan.host_);
  const auto it = std::find_if(loads_.begin(), loads_.end(),
                               [&](const PendingLoad& l) { return l.id == plan.id_; });
  for (BlockTable* t : it->tables)
    if (t->load_ == plan.id_) t->load_ = 0;
  loads_.erase(it);
  plan.state_ = PlanState::completed;
}

void Coordinator::abort_load(uint64_t id) {
  const auto it =
      std::find_if(loads_.begin(), loads_.end(), [&](const PendingLoad& l) { return l.id == id; });
  // The device pages need nothing: they are unnamed slots of the tables being freed.
  host_->free(it->host_pages);
  for (BlockTable* t : it->tables)
    if (t->load_ == id) t->load_ = 0;
  loads_.erase(it);
}

}  // namespace livetail
