// Where a page whose count drops to 0 re-enters the free queue (semantics section 2), as the
// C++ tests and the fuzz target expect it. One switch for both: the retention rule (unnamed
// pages to the front, named ones to the back) or the older rule (every page to the back).
#pragma once

#include <cstdint>
#include <deque>

namespace livetail::testing {

inline constexpr bool kRetentionRule = false;

// The queue after one page re-entered it.
inline void model_release(std::deque<int32_t>& queue, int32_t page, bool named) {
  if (kRetentionRule && !named)
    queue.push_front(page);
  else
    queue.push_back(page);
}

}  // namespace livetail::testing
