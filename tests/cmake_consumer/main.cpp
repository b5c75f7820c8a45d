// A C++ engine's use of livetail, built against the CMake package (tests/test_cmake_package.py).
// The semantics' reference figures: groups {full B=256; sliding B=128 W=511; sliding B=8
// W=12 live}, a fresh request of 8192 tokens takes 32 + 64 + 64 pages, 1024 live slots.
#include <livetail/livetail.h>  // the umbrella header: the whole API

#include <cstdio>
#include <stdexcept>
#include <vector>

int main() {
  using livetail::GroupKind;
  livetail::BlockPool pool(1 << 16);
  livetail::Coordinator coord({{GroupKind::full, 256},
                               {GroupKind::sliding, 128, 511},
                               {GroupKind::sliding, 8, 12, true}},
                              pool);
  livetail::BlockTable t0, t1, t2;
  std::vector<livetail::BlockTable*> tables{&t0, &t1, &t2};
  const long long charge = coord.blocks_needed_for_sequential(tables, 8192, 1);
  const bool ok = coord.acquire(tables, 8192);
  std::printf("charge %lld acquired %d pinned %lld live slots %lld\n", charge, ok ? 1 : 0,
              static_cast<long long>(pool.num_pinned()), static_cast<long long>(t2.size()));
  try {
    livetail::BlockPool bad(0);
  } catch (const std::invalid_argument&) {
    std::printf("invalid_argument\n");
  }
  coord.free(tables);
  std::printf("free %lld\n", static_cast<long long>(pool.num_free()));
  return 0;
}
