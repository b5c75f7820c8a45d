// Ops 9, 10, 15 and 11: the engine's own pages straight from the pool, eviction, and the
// usage errors of the coordinator, the managers and the pool.
#include "fuzz_world.h"

namespace livetail::fuzz {

void World::pool_allocate(int64_t k) {
  const Snapshot before = snapshot();
  std::vector<int32_t> out(static_cast<size_t>(k));
  if (pool_.allocate(k, out.data())) {
    CHECK(std::equal(out.begin(), out.end(), before.queue.begin()));
    for (int32_t p : out) CHECK(pool_.ref_count(p) == 1 && !pool_.is_cached(p));
    held_.insert(held_.end(), out.begin(), out.end());
  } else {
    CHECK(k > before.num_free);
    expect_unchanged(before);
  }
}

void World::pool_free(uint8_t a, uint8_t b) {
  if (held_.empty()) return;
  const size_t i = a % held_.size();
  const size_t len = 1 + b % (held_.size() - i);
  const std::vector<int32_t> batch(held_.begin() + static_cast<std::ptrdiff_t>(i),
                                   held_.begin() + static_cast<std::ptrdiff_t>(i + len));
  const Snapshot before = snapshot();
  CHECK(pool_.free(batch) == static_cast<int64_t>(len));
  held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i),
              held_.begin() + static_cast<std::ptrdiff_t>(i + len));
  expect_queue(before, std::vector<int32_t>(batch.rbegin(), batch.rend()));  // pn first
}

// Another request takes k pages and gives them back: named free pages are evicted oldest
// first, which is what sends a later match to the host.
void World::evict(int64_t k) {
  k = std::min(k, pool_.num_free());
  std::vector<int32_t> pages(static_cast<size_t>(k));
  const Snapshot before = snapshot();
  CHECK(pool_.allocate(k, pages.data()));
  CHECK(std::equal(pages.begin(), pages.end(), before.queue.begin()));
  for (int32_t p : pages) CHECK(!pool_.is_cached(p));
  forget_evicted();
  const Snapshot mid = snapshot();
  CHECK(pool_.free(pages) == k);
  expect_queue(mid, reversed(pages));
}

void World::bad_call(int r, uint8_t what) {
  auto ts = request(r);
  BlockTable& t0 = *ts[0];
  const Manager& m0 = coord_.managers()[0];
  const int64_t past = max_extent(r) + 1;
  const int64_t big = int64_t{1} << 40;
  switch (what % 14) {
    case 0:
      expect_throw([&] { coord_.acquire(ts, -1); });
      break;
    case 1:
      expect_throw([&] { coord_.acquire(ts, big); });
      break;
    case 2:
      expect_throw([&] { coord_.reclaim_expired(ts, past); });
      break;
    case 3:
      expect_throw([&] { coord_.reclaim_expired(ts, -1); });
      break;
    case 4:
      expect_throw([&] { coord_.blocks_needed_for_sequential(ts, 1, -1); });
      break;
    case 5:
      expect_throw(
          [&] { coord_.cache_full_blocks(ts, doc_keys(0, coord_.base_block_size()), past); });
      break;
    case 6: {
      std::vector<Key> dup(2, doc_keys(0, coord_.base_block_size())[0]);
      expect_throw([&] { static_cast<void>(coord_.match_prefix(dup)); });
      break;
    }
    case 7: {
      std::vector<BlockTable*> fewer(ts.begin(), ts.end() - 1);
      expect_throw([&] { coord_.acquire(fewer, 1); });
      break;
    }
    case 8:
      if (ts.size() >= 2) {
        std::vector<BlockTable*> dup(ts);
        dup.back() = dup.front();
        expect_throw([&] { coord_.free(dup); });
      }
      break;
    case 9:
      if (t0.is_bound()) expect_throw([&] { m0.acquire(other_, t0, 1); });
      break;
    case 10:
      expect_throw([&] { pool_.allocate(-1, nullptr); });
      break;
    case 11: {
      const int32_t none[] = {0};
      expect_throw([&] { pool_.free(none); });
      break;
    }
    case 12:  // one release more than the page has references: the whole batch is refused
      if (!held_.empty()) {
        const std::vector<int32_t> twice{held_.front(), held_.back(), held_.front()};
        expect_throw([&] { pool_.free(twice); });
      }
      break;
    default:
      expect_throw([&] { m0.reclaim_expired(pool_, t0, t0.extent() + 1); });
  }
}

}  // namespace livetail::fuzz
