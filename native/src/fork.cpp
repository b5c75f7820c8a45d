// Forks (semantics 13.6): a second request holding the same pages, then its own tail page.
#include <limits>
#include <stdexcept>
#include <string>

#include "livetail/coordinator.h"
#include "fail.h"

namespace livetail {

using detail::fail;
using detail::at;

namespace {

// The partially written last slot (tail room > 0), else -1 (spec/slots.py tail_slot).
int64_t tail_slot(const BlockTable& t) noexcept { return t.tail_available() > 0 ? t.size() - 1 : -1; }

}  // namespace

std::vector<int64_t> Coordinator::fork(std::span<BlockTable* const> tables,
                                       std::span<BlockTable* const> into) {
  check_tables_outlined(tables);
  const size_t g = managers_.size();
  if (into.size() != g)
    fail("into", "must hold one table per group (" + std::to_string(g) + "), got " +
                     std::to_string(into.size()));
  for (size_t i = 0; i < g; ++i) {
    if (into[i] == nullptr) fail(at("into", i), "is null");
    for (size_t j = 0; j < g; ++j)
      if (tables[j] == into[i]) fail(at("into", i), "is tables[" + std::to_string(j) + "]");
    for (size_t j = 0; j < i; ++j)
      if (into[j] == into[i]) fail(at("into", i), "repeats into[" + std::to_string(j) + "]");
    if (!into[i]->is_fresh()) fail(at("into", i), "is not fresh (empty and unbound)");
  }
  for (size_t i = 0; i < g; ++i) {
    const BlockTable& t = *tables[i];
    if (t.load_ != 0)
      fail(at("tables", i), "has a pending load (semantics section 10): its slots hold no "
                            "content yet; complete the load, then fork");
    // Reclaim left no real page below the floor.
    for (int64_t s = t.floor_; s < t.size(); ++s) {
      const int32_t p = t.slots_[static_cast<size_t>(s)];
      if (p != 0 && pool_->ref_[p] == std::numeric_limits<int32_t>::max())
        fail(at("tables", i), "holds page " + std::to_string(p) +
                                  ", which 2^31 - 1 holders already share (its reference "
                                  "count is full)");
    }
  }
  std::vector<int64_t> tails(g);
  for (size_t i = 0; i < g; ++i)  // the only throws (std::bad_alloc): nothing changed yet
    into[i]->slots_.reserve(tables[i]->slots_.size());
  bool changed = false;
  for (size_t i = 0; i < g; ++i) {
    const BlockTable& t = *tables[i];
    BlockTable& f = *into[i];
    f.slots_.assign(t.slots_.begin(), t.slots_.end());  // fork_cell: the same page, holes too
    for (int64_t s = t.floor_; s < t.size(); ++s) {
      const int32_t p = t.slots_[static_cast<size_t>(s)];
      if (p != 0) {  // forked: one more reference (share), never from the queue
        ++pool_->ref_[p];
        changed = true;
      }
    }
    f.tail_ = t.tail_;
    f.floor_ = t.floor_;
    f.real_ = t.real_;
    f.named_upto_ = t.named_upto_;
    f.pool_ = t.pool_;
    f.block_size_ = t.block_size_;
    f.coordinator_ = t.pool_ != nullptr ? id_ : 0;
    tails[i] = tail_slot(t);
  }
  pool_->version_ += changed;  // a step plan made before the fork is stale
  return tails;
}

std::optional<std::vector<Coordinator::TailCopy>> Coordinator::copy_tail(
    std::span<BlockTable* const> tables) {
  check_tables_outlined(tables);
  const size_t g = managers_.size();
  std::vector<TailCopy> copies;
  copies.reserve(g);  // the only throw (std::bad_alloc): nothing changed yet
  for (size_t i = 0; i < g; ++i) {
    const BlockTable& t = *tables[i];
    const int64_t a = tail_slot(t);
    if (a < 0) continue;
    const int32_t p = t.slots_[static_cast<size_t>(a)];
    if (p != 0 && pool_->ref_[p] >= 2)  // copies_tail: real, and another holder shares it
      copies.push_back({static_cast<int32_t>(i), p, 0});
  }
  if (static_cast<int64_t>(copies.size()) > pool_->num_free()) return std::nullopt;
  std::vector<int32_t> fresh(copies.size());
  if (!copies.empty()) pool_->take(static_cast<int64_t>(copies.size()), fresh.data());
  for (size_t e = 0; e < copies.size(); ++e) {
    TailCopy& c = copies[e];
    const auto i = static_cast<size_t>(c.group);
    BlockTable& t = *tables[i];
    c.new_page = fresh[e];
    t.slots_[static_cast<size_t>(t.size() - 1)] = fresh[e];  // copy_tail_cell
    pool_->release(c.shared_page);  // count >= 2: it stays pinned by its other holders
    ++pinned_[i];
  }
  return copies;
}

}  // namespace livetail
