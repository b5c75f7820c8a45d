#include "livetail/pool.h"

#include <new>
#include <stdexcept>
#include <string>

namespace livetail {

BlockPool::BlockPool(int64_t num_blocks) : num_blocks_(num_blocks), num_free_(0), fresh_(1) {
  if (num_blocks < 1 || num_blocks > geometry::INT32_MAX_TOKENS)
    throw std::invalid_argument("num_blocks must be in [1, 2**31 - 1], got " +
                                std::to_string(num_blocks));
  const auto n = static_cast<size_t>(num_blocks);
  ref_.reset(static_cast<int32_t*>(std::calloc(n, sizeof(int32_t))));
  link_.reset(static_cast<Link*>(std::malloc(n * sizeof(Link))));
  if (!ref_ || !link_) throw std::bad_alloc();
  link_[0] = {0, 0};
  num_free_ = num_blocks - 1;
}

int32_t BlockPool::ref_count(int64_t page) const {
  if (page < 0 || page >= num_blocks_)
    throw std::invalid_argument("page must be in [0, num_blocks), got " + std::to_string(page));
  return ref_[page];
}

bool BlockPool::allocate(int64_t k, int32_t* out) {
  if (k < 0) throw std::invalid_argument("k must be >= 0, got " + std::to_string(k));
  if (k > num_free_) return false;
  take(k, out);
  return true;
}

int64_t BlockPool::free(std::span<const int32_t> pages) {
  // Dry run: count the releases down, then put them back, so a bad batch changes nothing.
  size_t bad = pages.size();
  for (size_t i = 0; i < pages.size(); ++i) {
    const int32_t p = pages[i];
    if (p <= 0 || p >= num_blocks_ || ref_[p] == 0) {
      bad = i;
      break;
    }
    --ref_[p];
  }
  for (size_t i = 0; i < bad; ++i) ++ref_[pages[i]];
  if (bad != pages.size())
    throw std::invalid_argument("pages[" + std::to_string(bad) +
                                "] = " + std::to_string(pages[bad]) +
                                " is the null page, out of range, or not pinned that often");
  Releaser r(*this);
  for (size_t i = pages.size(); i-- > 0;) r.release(pages[i]);
  return r.done();
}

void BlockPool::copy_free_queue(int32_t* out) const noexcept {
  for (int64_t p = fresh_; p < num_blocks_; ++p) *out++ = static_cast<int32_t>(p);
  for (int32_t p = link_[0].next; p != 0; p = link_[p].next) *out++ = p;
}

void BlockPool::copy_ref_counts(int32_t* out) const noexcept {
  for (int64_t p = 0; p < num_blocks_; ++p) out[p] = ref_[p];
}

}  // namespace livetail
