// Deferred free (semantics section 12): a request's references detached from its tables and
// released later, in the order free would have released them.
#include <stdexcept>
#include <string>

#include "livetail/coordinator.h"
#include "fail.h"

namespace livetail {

using detail::fail;

DetachedTables Coordinator::detach(std::span<BlockTable* const> tables) {
  check_tables_outlined(tables);
  const size_t g = managers_.size();
  DetachedTables h;
  h.coordinator_ = id_;
  size_t total = 0;
  for (size_t i = 0; i < g; ++i) total += static_cast<size_t>(tables[i]->real_);
  h.pages_.reserve(total);  // the only throws (std::bad_alloc): nothing changed yet
  h.group_end_.reserve(g);
  for (size_t i = 0; i < g; ++i) {
    BlockTable& t = *tables[i];
    if (t.load_ != 0) abort_load(t.load_);
    // Reclaim left no real page below the floor.
    for (int64_t j = t.floor_; j < t.size(); ++j)
      if (t.slots_[static_cast<size_t>(j)] != 0) h.pages_.push_back(t.slots_[static_cast<size_t>(j)]);
    h.group_end_.push_back(h.pages_.size());
    t.slots_.clear();
    t.tail_ = t.floor_ = t.real_ = t.named_upto_ = 0;
    t.pool_ = nullptr;
    t.block_size_ = 0;
    t.coordinator_ = 0;
  }
  return h;
}

int64_t Coordinator::release_detached(DetachedTables& handle) {
  if (handle.coordinator_ != id_) fail("handle", "comes from another coordinator");
  if (handle.released_) fail("handle", "was released already");
  int64_t reentered = 0;
  size_t begin = 0;
  for (size_t i = 0; i < handle.group_end_.size(); ++i) {
    BlockPool::Releaser rel(*pool_);
    for (size_t e = handle.group_end_[i]; e-- > begin;) rel.release(handle.pages_[e]);
    const int64_t r = rel.done();
    pinned_[i] -= r;
    reentered += r;
    begin = handle.group_end_[i];
  }
  handle.released_ = true;
  return reentered;
}

}  // namespace livetail
