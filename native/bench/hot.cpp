// The hot operations, each alone, in two modes (benchmarks/instructions.py builds and runs it):
//   hot time [runs]   ns per operation, median of `runs` (default 31) runs per operation
//   hot count         runs each operation once, its measured loop between callgrind's
//                     collection toggles; run it under
//                     valgrind --tool=callgrind --collect-atstart=no, which dumps one profile
//                     per operation (instructions are load-independent: the same count on an
//                     idle and a busy machine for the same binary and inputs)
// Each line printed: `name iterations value` (value: ns per operation, or 0 in count mode,
// where instructions per operation = the dump's instruction total / iterations).
//
// Inputs are fixed (no clock, no randomness), so the instruction counts are exact and
// repeatable. The file compiles against today's headers and against older trees (the seed's
// first C++ core, a week-old main): rows whose API a tree lacks are left out (LIVETAIL_HOT_*).
// LIVETAIL_HOT_SLOWDOWN=n adds n dependent additions to every coordinator decode step (the
// regression gate's test builds it so, to check that the gate fails).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "livetail/coordinator.h"
#include "livetail/managers.h"
#include "livetail/pool.h"
#include "livetail/table.h"

#if __has_include("livetail/plan.h")
#define LIVETAIL_HOT_PLAN 1
#endif
#if __has_include("livetail/router.h")
#include "livetail/router.h"
#define LIVETAIL_HOT_ROUTER 1
#endif
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_DUMP_STATS_AT(x)
#endif

using namespace livetail;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kPoolPages = int64_t{1} << 20;

template <typename T>
inline void keep(T&& v) {
  asm volatile("" : "+r"(v) : : "memory");
}

// Start and stop of the measured loop: a clock in time mode, callgrind's toggle in count mode.
struct Meter {
  bool count = false;
  Clock::time_point t0{};
  double ns = 0;
  void start() {
    if (count) {
      CALLGRIND_TOGGLE_COLLECT;
    } else {
      t0 = Clock::now();
    }
  }
  void stop() {
    if (count) {
      CALLGRIND_TOGGLE_COLLECT;
    } else {
      ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    }
  }
};

// Touch every page once, as a pool in service has.
void warm(BlockPool& pool) {
  std::vector<int32_t> all(static_cast<size_t>(pool.num_free()));
  pool.allocate(pool.num_free(), all.data());
  pool.free(all);
}

std::vector<GroupSpec> three_groups() {
  return {GroupSpec(GroupKind::full, 256), GroupSpec(GroupKind::sliding, 128, 511),
          GroupSpec(GroupKind::sliding, 8, 12, true)};
}

// A coordinator over a warm pool of 2**20 pages (one per operation: each starts alike).
struct World {
  BlockPool pool{kPoolPages};
  Coordinator c{three_groups(), pool};
  World() { warm(pool); }
};

// Each operation: setup, then the measured loop between m.start() and m.stop(); returns the
// iterations the loop ran.
using Op = std::function<int64_t(Meter&)>;

int64_t manager_acquire(Meter& m) {
  BlockPool pool(kPoolPages);
  warm(pool);
  const SlidingWindowManager mgr(8, 12, 256);
  std::vector<BlockTable> tables(64);
  for (auto& t : tables) mgr.acquire(pool, t, 8192), mgr.free(pool, t);  // capacity kept
  m.start();
  for (auto& t : tables) {
    bool ok = mgr.acquire(pool, t, 8192);
    keep(ok);
  }
  m.stop();
  for (auto& t : tables) mgr.free(pool, t);
  return 64;
}

int64_t manager_free(Meter& m) {
  BlockPool pool(kPoolPages);
  warm(pool);
  const SlidingWindowManager mgr(8, 12, 256);
  std::vector<BlockTable> tables(64);
  for (auto& t : tables) mgr.acquire(pool, t, 8192);
  m.start();
  for (auto& t : tables) {
    int64_t r = mgr.free(pool, t);
    keep(r);
  }
  m.stop();
  return 64;
}

int64_t manager_decode(Meter& m) {
  BlockPool pool(kPoolPages);
  warm(pool);
  const SlidingWindowManager mgr(8, 12, 256);
  BlockTable t;
  mgr.acquire(pool, t, 8192 + 2048);  // capacity for the steps below
  mgr.free(pool, t);
  mgr.acquire(pool, t, 8192);
  constexpr int kSteps = 2048;
  m.start();
  for (int i = 0; i < kSteps; ++i) {
    const int64_t f = t.extent();
    mgr.acquire(pool, t, 1);
    mgr.reclaim_expired(pool, t, f);
  }
  m.stop();
  return kSteps;
}

// What a live-tail decode step cannot avoid, written by hand for this one geometry (B=8,
// W=12): the tail's count, one page taken per 8 tokens, the page that slid out released.
// No argument checks, no general geometry: the floor the decode step is compared with.
int64_t floor_decode(Meter& m) {
  BlockPool pool(kPoolPages);
  warm(pool);
  std::vector<int32_t> slots;
  slots.reserve(8192 / 8 + 2048 / 8 + 1);
  int64_t tail = 0, floor = 0;
  {
    BlockPool::Taker take(pool);
    for (int i = 0; i < 8192 / 8; ++i) slots.push_back(take.pop());
    take.done();
  }
  constexpr int kSteps = 2048;
  m.start();
  for (int i = 0; i < kSteps; ++i) {
    const int64_t f = static_cast<int64_t>(slots.size()) * 8 - tail;
    if (tail == 0) {
      BlockPool::Taker take(pool);
      slots.push_back(take.pop());
      take.done();
      tail = 8;
    }
    --tail;
    const int64_t b = f >= 11 ? (f - 11) >> 3 : 0;
    if (b > floor) {
      BlockPool::Releaser rel(pool);
      for (; floor < b; ++floor)
        if (slots[static_cast<size_t>(floor)] != 0)
          rel.release(slots[static_cast<size_t>(floor)]), slots[static_cast<size_t>(floor)] = 0;
      rel.done();
    }
  }
  m.stop();
  keep(tail);
  return kSteps;
}

int64_t coordinator_acquire(Meter& m) {
  World w;
  constexpr size_t kReqs = 64;
  std::vector<BlockTable> store(kReqs * 3);
  std::vector<BlockTable*> flat;
  for (auto& t : store) flat.push_back(&t);
  for (size_t q = 0; q < kReqs; ++q) {  // capacity kept, as an engine reuses tables
    w.c.acquire(std::span(flat).subspan(q * 3, 3), 8192);
    w.c.free(std::span(flat).subspan(q * 3, 3));
  }
  m.start();
  for (size_t q = 0; q < kReqs; ++q) {
    bool ok = w.c.acquire(std::span(flat).subspan(q * 3, 3), 8192);
    keep(ok);
  }
  m.stop();
  for (size_t q = 0; q < kReqs; ++q) w.c.free(std::span(flat).subspan(q * 3, 3));
  return kReqs;
}

int64_t coordinator_free(Meter& m) {
  World w;
  constexpr size_t kReqs = 64;
  std::vector<BlockTable> store(kReqs * 3);
  std::vector<BlockTable*> flat;
  for (auto& t : store) flat.push_back(&t);
  for (size_t q = 0; q < kReqs; ++q) w.c.acquire(std::span(flat).subspan(q * 3, 3), 8192);
  m.start();
  for (size_t q = 0; q < kReqs; ++q) {
    int64_t r = w.c.free(std::span(flat).subspan(q * 3, 3));
    keep(r);
  }
  m.stop();
  return kReqs;
}

int64_t coordinator_decode(Meter& m) {
  World w;
  BlockTable a, b, d;
  BlockTable* ts[3] = {&a, &b, &d};
  w.c.acquire(ts, 8192 + 2048);
  w.c.free(ts);
  w.c.acquire(ts, 8192);
  constexpr int kSteps = 2048;
  m.start();
  for (int i = 0; i < kSteps; ++i) {
    const int64_t f = a.extent();
    w.c.acquire(ts, 1);
    w.c.reclaim_expired(ts, f);
#ifdef LIVETAIL_HOT_SLOWDOWN
    uint64_t x = static_cast<uint64_t>(f);
    for (int k = 0; k < LIVETAIL_HOT_SLOWDOWN; ++k) {
      x = x * 3 + 1;
      keep(x);
    }
#endif
  }
  m.stop();
  return kSteps;
}

// 256 requests of the three groups holding 8192 tokens each, tables request-major.
struct Batch {
  static constexpr size_t kReqs = 256;
  World w;
  std::vector<BlockTable> store{kReqs * 3};
  std::vector<BlockTable*> flat;
  Batch() {
    for (auto& t : store) flat.push_back(&t);
    for (size_t q = 0; q < kReqs; ++q) w.c.acquire(std::span(flat).subspan(q * 3, 3), 8192 + 64);
    for (size_t q = 0; q < kReqs; ++q) w.c.free(std::span(flat).subspan(q * 3, 3));
    for (size_t q = 0; q < kReqs; ++q) w.c.acquire(std::span(flat).subspan(q * 3, 3), 8192);
  }
};

int64_t decode_step_256(Meter& m) {
  Batch b;
  std::vector<int64_t> fronts(Batch::kReqs);
  constexpr int kSteps = 8;
  double ns = 0;
  for (int i = 0; i < kSteps; ++i) {
    for (size_t q = 0; q < Batch::kReqs; ++q) fronts[q] = b.store[q * 3].extent();
    if (i == 0 && !m.count) {
      b.w.c.decode_step(b.flat, fronts);  // warm-up step, not timed
      continue;
    }
    m.start();
    DecodeResult res = b.w.c.decode_step(b.flat, fronts);
    m.stop();
    ns += m.ns;
    keep(res.stepped);
  }
  m.ns = ns;
  return static_cast<int64_t>((m.count ? kSteps : kSteps - 1) * Batch::kReqs);
}

#ifdef LIVETAIL_HOT_PLAN
// plan_step + apply_step (with_apply) or plan_step alone, per step of 256 requests.
int64_t plan_256(Meter& m, bool with_apply) {
  Batch b;
  const std::vector<int64_t> one(Batch::kReqs, 1);
  constexpr int kSteps = 8;
  double ns = 0;
  for (int i = 0; i < kSteps; ++i) {
    m.start();
    StepPlan p = b.w.c.plan_step(b.flat, one);
    if (with_apply) b.w.c.apply_step(p);
    m.stop();
    if (!with_apply) b.w.c.apply_step(p);
    ns += m.ns;
    int64_t s = p.stepped();
    keep(s);
  }
  m.ns = ns;
  return kSteps;
}
#endif

int64_t export_1024(Meter& m) {
  BlockPool pool(kPoolPages);
  const SlidingWindowManager mgr(8, 12, 0);
  BlockTable t;
  mgr.acquire(pool, t, 8192);
  std::vector<int32_t> out(1024);
  constexpr int kOps = 1000;
  m.start();
  for (int i = 0; i < kOps; ++i) {
    const auto ids = t.page_ids();
    std::memcpy(out.data(), ids.data(), ids.size_bytes());
    keep(out[0]);
  }
  m.stop();
  return kOps;
}

#ifdef LIVETAIL_HOT_ROUTER
// A router's query: the rows of 8192 key hashes in a table of 2**17 names (2**18 slots), then
// the greatest boundary of 8 engines of three groups (full 16, sliding 16 W=128, state 16)
// holding 1/8 .. 8/8 of the prompt; the Python index's answer for match_keys, less Python.
struct RouterWorld {
  static constexpr int kBits = 18;
  static constexpr size_t kKeys = 8192, kEngines = 8, kWidth = 24;
  std::vector<uint64_t> table = std::vector<uint64_t>(size_t{2} << kBits, 0);
  std::vector<uint64_t> hashes;
  std::vector<uint8_t> presence;
  std::vector<router::GroupRule> rules;  // 3 per engine
  RouterWorld() {
    uint64_t x = 0x1234567;
    auto next = [&x] {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      return x;
    };
    const size_t names = size_t{1} << (kBits - 1);
    std::vector<uint64_t> all(names);
    std::vector<int32_t> rows(names);
    for (size_t i = 0; i < names; ++i) all[i] = next(), rows[i] = static_cast<int32_t>(i + 1);
    router::place(table, kBits, all, rows);
    hashes.assign(all.begin(), all.begin() + kKeys);  // the prompt's keys: rows 1 .. 8192
    presence.assign((names + 1) * kWidth, 0);
    for (size_t e = 0; e < kEngines; ++e) {
      const size_t held = kKeys * (e + 1) / kEngines;
      for (size_t g = 0; g < 3; ++g) {
        const size_t col = e * 3 + g;
        for (size_t k = 0; k < held; ++k) presence[(k + 1) * kWidth + col] = 1;
        rules.push_back({16, g == 0 ? -1 : g == 1 ? 8 : 1, static_cast<int64_t>(col)});
      }
    }
  }
};

int64_t router_lookup(Meter& m) {
  RouterWorld w;
  std::vector<int32_t> rows(RouterWorld::kKeys);
  m.start();
  router::lookup(w.table, RouterWorld::kBits, w.hashes, rows);
  m.stop();
  keep(rows[0]);
  return 1;
}

// The 8 engines' boundaries: in one call (longest_many) when `many`, else one longest call
// per engine.
int64_t router_longest(Meter& m, bool many) {
  RouterWorld w;
  std::vector<int32_t> rows(RouterWorld::kKeys);
  router::lookup(w.table, RouterWorld::kBits, w.hashes, rows);
  int64_t sum = 0;
  std::vector<router::Longest> got(RouterWorld::kEngines);
  std::vector<size_t> ends;
  for (size_t e = 1; e <= RouterWorld::kEngines; ++e) ends.push_back(3 * e);
  const std::vector<int64_t> lcms(RouterWorld::kEngines, 16);
  m.start();
  if (many) {
#ifdef LIVETAIL_ROUTER_LONGEST_MANY
    router::longest_many(w.presence, RouterWorld::kWidth, rows, 16, lcms, w.rules, ends, got);
    for (const router::Longest& l : got) sum += l.num_tokens;
#endif
  } else {
    for (size_t e = 0; e < RouterWorld::kEngines; ++e)
      sum += router::longest(w.presence, RouterWorld::kWidth, rows, 16, 16,
                             std::span(w.rules).subspan(3 * e, 3))
                 .num_tokens;
  }
  m.stop();
  if (sum != 131072 * 9 / 2) std::fprintf(stderr, "router: unexpected total %ld\n", long(sum));
  return 1;
}
#endif

struct Row {
  const char* name;
  Op op;
};

std::vector<Row> rows() {
  std::vector<Row> out = {
      {"manager.acquire_8192_live", manager_acquire},
      {"manager.free_8192_live", manager_free},
      {"manager.decode_live", manager_decode},
      {"floor.decode_live", floor_decode},
      {"coordinator.acquire_8192", coordinator_acquire},
      {"coordinator.free_8192", coordinator_free},
      {"coordinator.decode", coordinator_decode},
      {"coordinator.decode_step_256", decode_step_256},
#ifdef LIVETAIL_HOT_PLAN
      {"coordinator.plan_apply_256", [](Meter& m) { return plan_256(m, true); }},
      {"coordinator.plan_step_256", [](Meter& m) { return plan_256(m, false); }},
#endif
      {"table.export_1024", export_1024},
#ifdef LIVETAIL_HOT_ROUTER
      {"router.lookup_8192", router_lookup},
#ifdef LIVETAIL_ROUTER_LONGEST_MANY
      {"router.longest_8_engines", [](Meter& m) { return router_longest(m, true); }},
#endif
      {"router.longest_8_engines_each", [](Meter& m) { return router_longest(m, false); }},
#endif
  };
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "time";
  const char* only = argc > 3 ? argv[3] : nullptr;  // one row by name
  if (mode == "count") {
    for (const Row& r : rows()) {
      if (only && std::strcmp(only, r.name) != 0) continue;
      Meter m;
      m.count = true;
      const int64_t n = r.op(m);
      CALLGRIND_DUMP_STATS_AT(r.name);
      std::printf("%s %ld 0\n", r.name, long(n));
    }
    return 0;
  }
  if (mode != "time") {
    std::fprintf(stderr, "usage: hot time [runs [row]] | hot count\n");
    return 2;
  }
  const int runs = argc > 2 ? std::atoi(argv[2]) : 31;
  for (const Row& r : rows()) {
    if (only && std::strcmp(only, r.name) != 0) continue;
    std::vector<double> v;
    int64_t n = 0;
    for (int i = 0; i <= runs; ++i) {
      Meter m;
      n = r.op(m);
      if (i > 0) v.push_back(m.ns / static_cast<double>(n));  // run 0 warms up
    }
    std::sort(v.begin(), v.end());
    std::printf("%s %ld %.2f\n", r.name, long(n), v[v.size() / 2]);
  }
  return 0;
}
