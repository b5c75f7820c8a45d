// Host tier (semantics section 10): a host pool with the device pool's queue, counts and
// names, and the plans of copies between the tiers. The coordinator makes and ends plans
// (coordinator.h); a plan only records the copies as flat int32 arrays for copy kernels.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "livetail/pool.h"
#include "livetail/prefix.h"

namespace livetail {

class BlockTable;

// Section 2's pool, for host pages: events from it carry tier "CPU".
class HostPool : public BlockPool {
 public:
  // Throws std::invalid_argument unless 1 <= num_blocks <= 2**31 - 1.
  explicit HostPool(int64_t num_blocks, bool events = false)
      : BlockPool(num_blocks, true, events) {}

  // Host pages named by complete_offload, and host pages whose load completed. O(1).
  int64_t pages_offloaded() const noexcept { return offloaded_; }
  int64_t pages_loaded() const noexcept { return loaded_; }

 private:
  friend class Coordinator;
  int64_t offloaded_ = 0;
  int64_t loaded_ = 0;
};

enum class PlanState : uint8_t { pending, completed, aborted };

// Entry i copies group groups()[i]'s slot slots()[i] between device_pages()[i] and
// host_pages()[i]; entries in group order, then slot order.
class CopyPlan {
 public:
  int64_t num_pages() const noexcept { return static_cast<int64_t>(groups_.size()); }
  std::span<const int32_t> groups() const noexcept { return groups_; }
  std::span<const int32_t> slots() const noexcept { return slots_; }
  std::span<const int32_t> device_pages() const noexcept { return device_; }
  std::span<const int32_t> host_pages() const noexcept { return host_; }

 protected:
  friend class Coordinator;
  uint64_t coordinator_ = 0;
  uint64_t id_ = 0;  // a load's key in its coordinator's pending loads
  PlanState state_ = PlanState::pending;
  std::vector<int32_t> groups_, slots_, device_, host_;
  std::vector<Key> keys_;     // the name each entry copies (with its group)
  std::vector<Key> parents_;  // key of slot - 1, for the stored event
  std::vector<uint8_t> has_parent_;
  // The token ids each entry's name carries (section 12): entry e's at
  // tokens_[token_at_[e], token_at_[e + 1]) (empty: none).
  std::vector<uint32_t> tokens_;
  std::vector<size_t> token_at_;
  void reserve_tokens(size_t entries, size_t tokens) {
    tokens_.reserve(tokens);
    token_at_.assign(entries + 1, 0);
  }
  void add_tokens(size_t e, std::span<const uint32_t> t) {
    tokens_.insert(tokens_.end(), t.begin(), t.end());
    token_at_[e + 1] = tokens_.size();
  }
  std::span<const uint32_t> entry_tokens(size_t e) const noexcept {
    if (token_at_.empty()) return {};
    return {tokens_.data() + token_at_[e], token_at_[e + 1] - token_at_[e]};
  }
};

// Device page -> host page; each device page holds one extra reference until the plan ends.
class OffloadPlan : public CopyPlan {
 public:
  PlanState state() const noexcept { return state_; }
};

// Host page -> device page, into a claimed request's real slots. Freeing the request aborts
// it: Coordinator::load_state tells (the plan itself cannot see the free).
class LoadPlan : public CopyPlan {};

}  // namespace livetail
