// The whole-prompt charge of a request that claims a prefix match first (semantics 13.1
// with a prefix hit; spec/prompt.py and Manager.prompt_after_claim in spec/managers.py).

#include <cstdint>
#include <span>
#include <vector>

#include "livetail/coordinator.h"

namespace livetail {

int64_t Manager::prompt_after_claim(int64_t T, std::span<const int32_t> pages,
                                    std::span<const int32_t> host_pages,
                                    std::span<const int32_t> ref, int64_t n, int64_t C,
                                    int64_t d) const {
  const auto slots = static_cast<int64_t>(pages.size());
  // Both counts are int32-limited by now, so their sum cannot overflow.
  check_fits(slots, 0, n, "num_tokens");
  check_fits(slots, 0, d, "decode_tokens");
  check_fits(slots, 0, n + d, "num_tokens + decode_tokens");
  int64_t taken = 0;
  std::vector<int64_t> shared;
  for (int64_t j = 0; j < slots; ++j) {
    const int32_t p = pages[static_cast<size_t>(j)];
    if (p == 0) continue;
    if (ref[static_cast<size_t>(p)] == 0)
      ++taken;  // the claim takes it off the free queue: its release gives it back
    else
      shared.push_back(j);  // another holder pins it: its release gives nothing back
  }
  for (const int32_t h : host_pages) taken += h != 0;  // a fresh device page each
  return geometry::prompt_charge_after_claim(kind_, T, shared, taken, n, C, d, W_, B_, A_, C_);
}

int64_t Coordinator::blocks_needed_for_prompt_after_claim(const PrefixMatch& match,
                                                          int64_t num_tokens,
                                                          int64_t max_chunk_tokens,
                                                          int64_t decode_tokens) const {
  Manager::check_count(num_tokens, "num_tokens");
  Manager::check_chunk(max_chunk_tokens);
  Manager::check_count(decode_tokens, "decode_tokens");
  check_match(match);
  const std::span<const int32_t> ref(pool_->ref_.get(),
                                     static_cast<size_t>(pool_->num_blocks()));
  int64_t need = 0;
  for (size_t i = 0; i < managers_.size(); ++i) {  // each group checks before it sums
    const auto g = static_cast<int64_t>(i);
    need += managers_[i].prompt_after_claim(match.num_tokens(), match.pages(g),
                                            match.host_pages(g), ref, num_tokens,
                                            max_chunk_tokens, decode_tokens);
  }
  return need;
}

}  // namespace livetail
