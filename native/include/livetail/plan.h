// Step plans (semantics section 9): one exact plan for a step of many requests on one pool.
#pragma once

#include <cstdint>
#include <vector>

namespace livetail {

class BlockPool;
class BlockTable;

// Made by Coordinator::plan_step, applied once by Coordinator::apply_step while the pool and
// its tables are unchanged. Requests [0, stepped) step; [stepped, stepped + preempted) are
// preempted (their tables freed).
class StepPlan {
 public:
  int64_t stepped() const noexcept { return stepped_; }
  int64_t preempted() const noexcept { return num_requests() - stepped_; }
  int64_t num_requests() const noexcept { return static_cast<int64_t>(tokens_.size()); }
  // Pages the stepped requests' acquires take.
  int64_t pages_taken() const noexcept { return taken_; }
  // Distinct pages whose every reference is held by the preempted requests' tables.
  int64_t pages_released() const noexcept { return released_; }
  // Free pages once the plan is applied (before any reclaim): free + released - taken.
  int64_t free_after() const noexcept { return free_after_; }
  // False when the top request does not fit even with every other request preempted.
  bool top_fits() const noexcept { return top_fits_; }
  bool applied() const noexcept { return applied_; }

 private:
  friend class Coordinator;
  struct Shape {
    // Left uninitialized by default: plan_step sizes the vector, then writes every entry.
    Shape() noexcept {}  // NOLINT: no zero fill of a vector about to be overwritten
    Shape(int64_t size_, int64_t tail_, int64_t floor_, const BlockPool* pool_) noexcept
        : size(size_), tail(tail_), floor(floor_), pool(pool_) {}
    int64_t size, tail, floor;
    const BlockPool* pool;
    bool operator==(const Shape&) const = default;
  };
  int64_t stepped_ = 0, taken_ = 0, released_ = 0, free_after_ = 0;
  bool top_fits_ = true, applied_ = false;
  uint64_t coordinator_ = 0, version_ = 0;
  std::vector<BlockTable*> tables_;  // request-major
  std::vector<Shape> shapes_;        // per table, at plan time
  std::vector<int64_t> tokens_;      // per request
};

}  // namespace livetail
