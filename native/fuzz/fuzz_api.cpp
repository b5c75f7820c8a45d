// Fuzz target over the C++ API: the input bytes are decoded into a small coordinator and a
// sequence of calls (native/fuzz/README.md gives the encoding); after every call the
// semantics' invariants are checked and any violation aborts with the reason. This file
// decodes the input and dispatches each call to its family (fuzz_world.h lists the files).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_world.h"

namespace livetail::fuzz {

void World::step(Input& in) {
  const uint8_t op = in.byte();
  const int r = in.byte() % kRequests;
  const uint8_t a = in.byte(), b = in.byte();
  switch (op % 18) {
    case 0:
      acquire(r, tokens(a, r));
      break;
    case 1: {
      const int64_t first = tokens(a, r);
      const int64_t extra = std::min<int64_t>(b % 8, kMaxTokens - max_extent(r) - first);
      admit(r, first, extra, b & 0x80);
      break;
    }
    case 2:
      reclaim(r, frontier(a, r));
      break;
    case 3:
      free_request(r);
      break;
    case 4:
      group_op(r, (a & 15) % groups(), a >> 4, b);
      break;
    case 5:
      cache(r, b % 3, frontier(a, r), b & 0x80 ? (b >> 4) % 4 : 0);
      break;
    case 6: {
      const int64_t n = a < 128 ? kMaxTokens : (a % 64) * coord_.lcm_block_size();
      match_and_claim(r, b % 3, std::min(n, kMaxTokens), b & 0x80, b & 0x40);
      break;
    }
    case 7:
      claim_saved(r);
      break;
    case 8:
      decode_step();
      break;
    case 9:
      pool_allocate(a % 8);
      break;
    case 10:
      pool_free(a, b);
      break;
    case 11:
      bad_call(r, a);
      break;
    case 12:
      plan_and_apply(a, b);
      break;
    case 13:
      offload(r, frontier(a, r), b % 4);
      break;
    case 14: {
      if (!host_) {
        OffloadPlan none;
        expect_throw([&] { coord_.complete_offload(none); });
        expect_throw([&] { coord_.abort_offload(none); });
      } else if (!offloads_.empty()) {  // a pending plan, counted from the latest
        end_offload(offloads_.size() - 1 - a % offloads_.size(), (b & 1) == 0);
      }
      break;
    }
    case 15:
      evict(a);
      break;
    case 16:
      complete_load(r, a & 1);
      break;
    default:
      host_misuse(r, a);
  }
  forget_evicted();
}

}  // namespace livetail::fuzz

using namespace livetail;
using namespace livetail::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const int64_t num_blocks = 2 + in.byte() % 31;
  const uint8_t shape = in.byte();
  const int groups = 1 + (shape & 3) % 3;
  const bool retention = (shape & 0x80) == 0;
  const int64_t host_blocks = (shape >> 2) & 31;  // 0: no host pool
  std::vector<GroupSpec> specs;
  for (int g = 0; g < groups; ++g) {
    const uint8_t k = in.byte(), w = in.byte();
    const int64_t B = kPageSizes[(k >> 2) % 6];
    const int64_t W = 1 + w % 40;
    switch (k % 4) {
      case 0:
        specs.emplace_back(GroupKind::full, B);
        break;
      case 1:
        specs.emplace_back(GroupKind::sliding, B, W);
        break;
      case 2:
        specs.emplace_back(GroupKind::sliding, B, W, true);
        break;
      default:
        specs.emplace_back(GroupKind::state, B);
    }
  }
  World world(specs, num_blocks, retention, host_blocks);
  world.check();
  for (int ops = 0; !in.empty() && ops < 256; ++ops) {
    world.step(in);
    world.check();
  }
  return 0;
}
