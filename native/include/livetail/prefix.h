// Prefix caching (semantics section 8): page keys (a SHA-256 chain) and the result of a
// match. Names live in the pool (pool.h); naming, matching and claiming are coordinator
// calls (coordinator.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace livetail {

inline constexpr size_t KEY_BYTES = 32;
// One key per full base page: a 32-byte digest of every token up to the page's end (and salt).
using Key = std::array<uint8_t, KEY_BYTES>;

// FIPS 180-4 SHA-256, incremental.
class Sha256 {
 public:
  // accelerated: use the x86 SHA extensions when the CPU has them (same digests, ~5x faster).
  explicit Sha256(bool accelerated = true) noexcept;
  void update(const void* data, size_t len) noexcept;
  // Pads and returns the digest; the object is spent afterwards.
  Key digest() noexcept;
  // "sha-ni" or "portable": what Sha256(true) runs on this CPU.
  static const char* implementation() noexcept;

 private:
  using Compress = void (*)(uint32_t* state, const uint8_t* blocks, size_t num_blocks) noexcept;
  Compress compress_;
  uint32_t h_[8];
  uint8_t buf_[64];
  uint64_t len_ = 0;  // bytes so far
  size_t fill_ = 0;   // bytes waiting in buf_
};

Key sha256(const void* data, size_t len) noexcept;

// key_j = SHA-256(key_{j-1} || tokens of base page j as little-endian uint32 || salt), where
// key_{-1} is empty; a partial last page gets no key. Throws std::invalid_argument unless
// 1 <= base_block_size <= 2**31 - 1.
std::vector<Key> page_keys(std::span<const uint32_t> tokens, int64_t base_block_size,
                           std::span<const uint8_t> salt = {});

// Throws std::invalid_argument naming `keys` if two keys are equal (a chain never repeats).
// O(n) expected, no allocation after the first calls on a thread.
void check_keys(std::span<const Key> keys);

// A read-only lookup result (Coordinator::match_prefix): the boundary and, per group, the
// page id of each slot below it (0 = hole). It also remembers its coordinator and, for every
// real page, the name the page was matched under, so that a claim can tell it is still valid.
class PrefixMatch {
 public:
  int64_t num_tokens() const noexcept { return num_tokens_; }
  // 0 for a default-constructed match (which no coordinator accepts).
  int64_t num_groups() const noexcept {
    return begin_.empty() ? 0 : static_cast<int64_t>(begin_.size()) - 1;
  }
  // Group g's slots, num_tokens() / block_size of the group.
  std::span<const int32_t> pages(int64_t g) const noexcept {
    const auto i = static_cast<size_t>(g);
    return std::span(pages_).subspan(static_cast<size_t>(begin_[i]),
                                     static_cast<size_t>(begin_[i + 1] - begin_[i]));
  }
  int64_t num_real_pages() const noexcept { return static_cast<int64_t>(named_.size()); }
  // Group g's host page per slot: non-zero where the slot is served from the host tier.
  std::span<const int32_t> host_pages(int64_t g) const noexcept {
    const auto i = static_cast<size_t>(g);
    return std::span(host_pages_).subspan(static_cast<size_t>(begin_[i]),
                                          static_cast<size_t>(begin_[i + 1] - begin_[i]));
  }
  int64_t num_host_pages() const noexcept { return static_cast<int64_t>(host_named_.size()); }

 private:
  friend class Coordinator;
  struct Named {
    int32_t page;
    int32_t group;
    Key key;
  };

  uint64_t coordinator_ = 0;  // Coordinator::id() of the coordinator that made it
  int64_t num_tokens_ = 0;
  std::vector<int32_t> pages_;  // every group's slots, group after group
  std::vector<int64_t> begin_;  // group g is pages_[begin_[g], begin_[g+1])
  std::vector<Named> named_;    // one per real device page
  struct HostNamed {
    int32_t page;
    int32_t group;
    int64_t slot;
    Key key;
    bool has_parent;
    Key parent;  // key of slot - 1, for the loaded page's stored event
  };
  std::vector<int32_t> host_pages_;     // same layout as pages_, 0 = not from the host
  std::vector<HostNamed> host_named_;   // one per host-served slot, group then slot order
};

}  // namespace livetail
