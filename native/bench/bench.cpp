// C++ benchmark of the livetail core: ns per operation, median of repeated runs, pool of
// 2**20 pages. Run: python benchmarks/run_cpp.py (configures with LIVETAIL_BUILD_BENCH=ON).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "livetail/coordinator.h"
#include "livetail/managers.h"
#include "livetail/pool.h"
#include "livetail/prefix.h"
#include "livetail/table.h"

using namespace livetail;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kPoolPages = int64_t{1} << 20;
constexpr int kRuns = 31;

// Keeps the compiler from folding a value or hoisting a call out of the timed loop.
template <typename T>
inline void keep(T&& v) {
  asm volatile("" : "+r"(v) : : "memory");
}

double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Touch every page once, as a pool in service has: a new pool's pages are untouched memory
// and their first use would measure page faults, not the allocator.
void warm(BlockPool& pool) {
  std::vector<int32_t> all(static_cast<size_t>(pool.num_free()));
  pool.allocate(pool.num_free(), all.data());
  pool.free(all);
}

void report(const char* name, double ns) { std::printf("%-70s %12.1f ns\n", name, ns); }

// Runs `body` (which returns ns per operation) kRuns times after one warm-up run.
void bench(const char* name, const std::function<double()>& body) {
  body();  // warm-up
  std::vector<double> v(kRuns);
  for (double& x : v) x = body();
  report(name, median(v));
}

void needed_for(const char* name, int64_t tokens) {
  SlidingWindowManager m(8, 12, 256);
  BlockTable t;
  bench(name, [&] {
    constexpr int kOps = 100000;
    int64_t sum = 0;
    auto t0 = Clock::now();
    for (int i = 0; i < kOps; ++i) {
      int64_t n = tokens;
      keep(n);
      sum += m.blocks_needed_for(t, n);
    }
    const double ns = ns_since(t0) / kOps;
    keep(sum);
    return ns;
  });
}

// acquire(tokens) on kTables emptied tables (capacity kept, as an engine reuses them), then
// free: times the acquires and the frees separately.
void acquire_and_free(const char* acquire_name, const char* free_name, const Manager& m,
                      int64_t tokens) {
  constexpr int kTables = 64;
  BlockPool pool(kPoolPages);
  warm(pool);
  std::vector<BlockTable> tables(kTables);
  std::vector<double> acq, fre;
  for (int r = 0; r <= kRuns; ++r) {
    auto t0 = Clock::now();
    for (auto& t : tables) {
      bool ok = m.acquire(pool, t, tokens);
      keep(ok);
    }
    const double a = ns_since(t0) / kTables;
    t0 = Clock::now();
    for (auto& t : tables) m.free(pool, t);
    const double f = ns_since(t0) / kTables;
    if (r > 0) acq.push_back(a), fre.push_back(f);  // run 0 warms up
  }
  report(acquire_name, median(acq));
  if (free_name) report(free_name, median(fre));
}

// Decode: a request holding `prompt` tokens generates; each step acquires one token and
// reclaims at the frontier before it.
void decode(const char* name, const Manager& m, int64_t prompt, int steps_per_run) {
  BlockPool pool(kPoolPages);
  warm(pool);
  BlockTable t;
  bench(name, [&] {
    m.free(pool, t);
    m.acquire(pool, t, prompt);
    auto t0 = Clock::now();
    for (int i = 0; i < steps_per_run; ++i) {
      const int64_t f = t.extent();
      m.acquire(pool, t, 1);
      m.reclaim_expired(pool, t, f);
    }
    return ns_since(t0) / steps_per_run;
  });
}

std::vector<GroupSpec> three_groups() {
  return {GroupSpec(GroupKind::full, 256), GroupSpec(GroupKind::sliding, 128, 511),
          GroupSpec(GroupKind::sliding, 8, 12, true)};
}

// Step planning (semantics section 9): plan_step + apply_step for 256 decoding requests of
// the three-group layout, each holding 8192 tokens, one token each per step; per step.
void step_plan() {
  constexpr size_t kReqs = 256;
  BlockPool pool(kPoolPages);
  warm(pool);
  Coordinator c(three_groups(), pool);
  std::vector<BlockTable> store(kReqs * 3);
  std::vector<BlockTable*> flat;
  for (auto& t : store) flat.push_back(&t);
  const std::vector<int64_t> one(kReqs, 1);
  double plan_ns = 0;
  bench("three-group plan_step + apply_step, 256 decoding requests, per step", [&] {
    for (size_t q = 0; q < kReqs; ++q) c.free(std::span(flat).subspan(q * 3, 3));
    for (size_t q = 0; q < kReqs; ++q) c.acquire(std::span(flat).subspan(q * 3, 3), 8192);
    constexpr int kSteps = 20;
    double ns = 0, plan_only = 0;
    for (int i = 0; i < kSteps; ++i) {
      auto t0 = Clock::now();
      StepPlan p = c.plan_step(flat, one);
      plan_only += ns_since(t0);
      c.apply_step(p);
      ns += ns_since(t0);
      int64_t stepped = p.stepped();
      keep(stepped);
    }
    plan_ns = plan_only / kSteps;
    return ns / kSteps;
  });
  report("  of which plan_step (last run)", plan_ns);
}

// Prefix caching at 32 Ki tokens in the three-group coordinator (base 8, lcm 256): page
// keys, naming a computed prompt, matching it, and claiming the match.
void prefix_caching() {
  constexpr int64_t kTokens = 32768, kChunk = 2048;
  constexpr int kPrompts = 40;  // distinct prompts, so the names of earlier runs stay around
  std::mt19937 rng(7);
  std::vector<std::vector<uint32_t>> prompts(kPrompts, std::vector<uint32_t>(kTokens));
  for (auto& p : prompts)
    for (auto& t : p) t = static_cast<uint32_t>(rng() % 50000);

  std::vector<std::vector<Key>> keys(kPrompts);
  {
    std::vector<double> v;
    for (int r = 0; r < kPrompts; ++r) {
      auto t0 = Clock::now();
      keys[static_cast<size_t>(r)] = page_keys(prompts[static_cast<size_t>(r)], 8);
      v.push_back(ns_since(t0));
    }
    report("page_keys of 32 Ki tokens, base 8 (4096 SHA-256 keys)", median(v));
  }
  {
    std::vector<double> v;
    for (int r = 0; r < kRuns; ++r) {
      auto t0 = Clock::now();
      check_keys(keys[0]);
      v.push_back(ns_since(t0));
    }
    report("check_keys of 4096 keys (distinctness, inside every naming/match call)", median(v));
  }

  BlockPool pool(kPoolPages);
  warm(pool);
  Coordinator c(three_groups(), pool);
  BlockTable a, b, d;
  BlockTable* ts[3] = {&a, &b, &d};
  // Naming: one prompt computed in 16 chunks of 2048, named after each chunk, then reclaimed
  // (timed: the 16 naming calls); and the whole prompt acquired at once and named in one call.
  std::vector<double> chunked, whole, hit, miss, consumed, claim_ns, named_counts;
  BlockTable x, y, z;
  BlockTable* claimed[3] = {&x, &y, &z};
  for (int r = 0; r < kPrompts; ++r) {
    const std::vector<Key>& ks = keys[static_cast<size_t>(r)];
    double ns = 0;
    int64_t named = 0;
    for (int64_t done = 0; done < kTokens;) {
      c.acquire(ts, kChunk);
      done += kChunk;
      auto t0 = Clock::now();
      named += c.cache_full_blocks(ts, ks, done);
      ns += ns_since(t0);
      c.reclaim_expired(ts, done);
    }
    chunked.push_back(ns);
    named_counts.push_back(static_cast<double>(named));
    auto t0 = Clock::now();
    const PrefixMatch m = c.match_prefix(ks);
    hit.push_back(ns_since(t0));
    if (m.num_tokens() != kTokens)
      std::printf("unexpected match of %ld tokens\n", long(m.num_tokens()));
    c.free(ts);  // the named pages wait in the free queue: the claim takes them out
    t0 = Clock::now();
    int64_t n = c.blocks_consumed_by_claim(m);
    consumed.push_back(ns_since(t0));
    keep(n);
    t0 = Clock::now();
    c.claim(claimed, m);
    claim_ns.push_back(ns_since(t0));
    c.free(claimed);
    // A miss: no prefix of a new prompt is cached (the full group stops at its first slot).
    const std::vector<Key>& other = keys[static_cast<size_t>((r + 1) % kPrompts)];
    if (r + 1 < kPrompts) {
      t0 = Clock::now();
      const PrefixMatch none = c.match_prefix(other);
      miss.push_back(ns_since(t0));
      int64_t got = none.num_tokens();
      keep(got);
    }
    // The whole prompt at once (one naming call over 32 Ki tokens), pages freed after.
    c.acquire(ts, kTokens);
    BlockTable* fresh_ts[3] = {&a, &b, &d};
    std::vector<Key> salted = ks;
    salted[0][0] ^= 1;  // another chain: all names new
    for (size_t i = 1; i < salted.size(); ++i) salted[i][1] ^= 1;
    t0 = Clock::now();
    int64_t w = c.cache_full_blocks(fresh_ts, salted, kTokens);
    whole.push_back(ns_since(t0));
    keep(w);
    c.free(ts);
  }
  std::printf("  (a 32 Ki prompt names %.0f pages in 16 chunks; the cache holds %ld names)\n",
              median(named_counts), long(pool.num_cached()));
  report("cache_full_blocks, 32 Ki prompt in 16 chunks of 2048, all 16 calls", median(chunked));
  report("cache_full_blocks, 32 Ki tokens acquired at once, one call", median(whole));
  report("match_prefix, 32 Ki prompt, hit of 32768 tokens (134 pages)", median(hit));
  report("match_prefix, 32 Ki prompt, miss", median(miss));
  report("blocks_consumed_by_claim of that match", median(consumed));
  report("claim of that match (134 free pages leave the queue)", median(claim_ns));

  // Eviction cost: a three-group acquire of 8192 tokens (160 pages) from a queue whose pages
  // all carry names (each pop drops one), against the same acquire with no names at all.
  for (const bool named : {false, true}) {
    BlockPool small(4096);
    warm(small);
    Coordinator cc(three_groups(), small);
    std::vector<double> v;
    for (int r = 0; r < 200; ++r) {
      std::vector<Key> ks = keys[static_cast<size_t>(r % kPrompts)];
      ks[0][2] ^= static_cast<uint8_t>(r);  // a new chain per run: fresh names
      for (size_t i = 1; i < 1024; ++i) ks[i][3] ^= static_cast<uint8_t>(r);
      ks.resize(1024);
      auto t0 = Clock::now();
      cc.acquire(ts, 8192);
      v.push_back(ns_since(t0));
      if (named) cc.cache_full_blocks(ts, ks, 8192);
      cc.free(ts);
    }
    report(named ? "three-group acquire 8192 from a queue of named pages (160 evictions)"
                 : "three-group acquire 8192, same loop without names",
           median(v));
  }
}

// Events on against events off, interleaved run by run so that machine noise hits both alike:
// the hot paths (acquire, decode) and naming with eviction, which is where events are queued.
void events_on_off() {
  struct Row {
    const char* name;
    std::function<double(bool)> body;  // events on? -> ns per operation
  };
  auto coordinator_acquire = [](bool ev) {
    BlockPool pool(int64_t{1} << 16, true, ev);
    Coordinator c(three_groups(), pool);
    constexpr size_t kReqs = 64;
    std::vector<BlockTable> store(kReqs * 3);
    auto t0 = Clock::now();
    for (size_t q = 0; q < kReqs; ++q) {
      BlockTable* ts[3] = {&store[q * 3], &store[q * 3 + 1], &store[q * 3 + 2]};
      bool ok = c.acquire(ts, 8192);
      keep(ok);
    }
    return ns_since(t0) / kReqs;
  };
  auto coordinator_decode = [](bool ev) {
    BlockPool pool(int64_t{1} << 16, true, ev);
    Coordinator c(three_groups(), pool);
    BlockTable a, b, d;
    BlockTable* ts[3] = {&a, &b, &d};
    c.acquire(ts, 8192);
    constexpr int kSteps = 2000;
    auto t0 = Clock::now();
    for (int i = 0; i < kSteps; ++i) {
      const int64_t f = a.extent();
      c.acquire(ts, 1);
      c.reclaim_expired(ts, f);
    }
    return ns_since(t0) / kSteps;
  };
  auto manager_decode = [](bool ev) {
    BlockPool pool(int64_t{1} << 16, true, ev);
    SlidingWindowManager m(8, 12, 256);
    BlockTable t;
    m.acquire(pool, t, 8192);
    constexpr int kSteps = 2000;
    auto t0 = Clock::now();
    for (int i = 0; i < kSteps; ++i) {
      const int64_t f = t.extent();
      m.acquire(pool, t, 1);
      m.reclaim_expired(pool, t, f);
    }
    return ns_since(t0) / kSteps;
  };
  // Name a 8192-token request, free it, and acquire another that evicts those names (160
  // stored keys and 160 removed keys per run when events are on); ns per run.
  std::vector<uint32_t> tokens(8192);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint32_t>(i * 2654435761u);
  std::vector<std::vector<Key>> chains;  // a new chain per run: fresh names
  for (uint8_t r = 0; r < 16; ++r) chains.push_back(page_keys(tokens, 8, std::span(&r, 1)));
  auto name_and_evict = [&chains](bool ev) {
    BlockPool pool(161, true, ev);
    Coordinator c(three_groups(), pool);
    BlockTable a, b, d;
    BlockTable* ts[3] = {&a, &b, &d};
    double ns = 0;
    for (const std::vector<Key>& keys : chains) {
      auto t0 = Clock::now();
      c.acquire(ts, 8192);
      c.cache_full_blocks(ts, keys, 8192);
      c.free(ts);
      ns += ns_since(t0);
      pool.clear_events();
    }
    return ns / 16;
  };
  const Row rows[] = {
      {"three-group coordinator acquire 8192", coordinator_acquire},
      {"three-group decode step (acquire 1 + reclaim)", coordinator_decode},
      {"decode step live-tail (acquire 1 + reclaim)", manager_decode},
      {"acquire + name 8192 tokens + free, evicting the previous names", name_and_evict},
  };
  std::printf("events off / on (interleaved runs, median):\n");
  for (const Row& row : rows) {
    std::vector<double> off, on;
    row.body(false), row.body(true);  // warm-up
    for (int r = 0; r < kRuns; ++r) off.push_back(row.body(false)), on.push_back(row.body(true));
    const double a = median(off), b = median(on);
    std::printf("  %-66s %9.1f / %9.1f ns (%+.1f%%)\n", row.name, a, b, 100.0 * (b - a) / a);
  }
}

}  // namespace

int main() {
  std::printf("livetail C++ core, pool of 2**20 pages, median of %d runs\n", kRuns);

  needed_for("blocks_needed_for live B=8 W=12 A=256, 8192 tokens", 8192);
  needed_for("blocks_needed_for live B=8 W=12 A=256, 131072 tokens", 131072);
  needed_for("blocks_needed_for live B=8 W=12 A=256, 1Mi tokens", 1 << 20);

  acquire_and_free("acquire 8192 live-tail B=8 W=12 A=256 (64 real pages)",
                   "free of that live-tail table", SlidingWindowManager(8, 12, 256), 8192);
  acquire_and_free("acquire 8192 plain sliding B=8 W=12 (1024 real pages)", nullptr,
                   SlidingWindowManager(8, 12, 0), 8192);
  acquire_and_free("acquire 8192 full B=256 (32 pages)", nullptr, FullAttentionManager(256), 8192);

  decode("decode step live-tail (acquire 1 + reclaim)", SlidingWindowManager(8, 12, 256), 8192,
         1000);

  {  // three-group coordinator acquire of a fresh 8192-token request, then free
    BlockPool pool(kPoolPages);
    warm(pool);
    Coordinator c(three_groups(), pool);
    constexpr size_t kReqs = 64;
    std::vector<BlockTable> store(kReqs * 3);
    std::vector<double> acq, fre;
    for (int r = 0; r <= kRuns; ++r) {
      auto t0 = Clock::now();
      for (size_t q = 0; q < kReqs; ++q) {
        BlockTable* ts[3] = {&store[q * 3], &store[q * 3 + 1], &store[q * 3 + 2]};
        bool ok = c.acquire(ts, 8192);
        keep(ok);
      }
      const double a = ns_since(t0) / kReqs;
      t0 = Clock::now();
      for (size_t q = 0; q < kReqs; ++q) {
        BlockTable* ts[3] = {&store[q * 3], &store[q * 3 + 1], &store[q * 3 + 2]};
        c.free(ts);
      }
      const double f = ns_since(t0) / kReqs;
      if (r > 0) acq.push_back(a), fre.push_back(f);
    }
    report("three-group coordinator acquire 8192 {full 256; sliding 128; live 8}", median(acq));
    report("three-group coordinator free of that request", median(fre));
  }

  {  // three-group decode step, one request at a time and batched
    BlockPool pool(kPoolPages);
    warm(pool);
    Coordinator c(three_groups(), pool);
    BlockTable a, b, d;
    BlockTable* ts[3] = {&a, &b, &d};
    bench("three-group decode step (acquire 1 + reclaim)", [&] {
      c.free(ts);
      c.acquire(ts, 8192);
      constexpr int kSteps = 1000;
      auto t0 = Clock::now();
      for (int i = 0; i < kSteps; ++i) {
        const int64_t f = a.extent();
        c.acquire(ts, 1);
        c.reclaim_expired(ts, f);
      }
      return ns_since(t0) / kSteps;
    });

    constexpr size_t kReqs = 256;
    std::vector<BlockTable> store(kReqs * 3);
    std::vector<BlockTable*> flat;
    flat.reserve(store.size());
    for (auto& t : store) flat.push_back(&t);
    std::vector<int64_t> fronts(kReqs);
    bench("three-group decode_step, batch of 256 requests, per request", [&] {
      for (size_t q = 0; q < kReqs; ++q) c.free(std::span(flat).subspan(q * 3, 3));
      for (size_t q = 0; q < kReqs; ++q) c.acquire(std::span(flat).subspan(q * 3, 3), 8192);
      constexpr int kSteps = 20;
      double ns = 0;
      for (int i = 0; i < kSteps; ++i) {
        for (size_t q = 0; q < kReqs; ++q) fronts[q] = store[q * 3].extent();
        auto t0 = Clock::now();
        DecodeResult res = c.decode_step(flat, fronts);
        ns += ns_since(t0);
        keep(res.stepped);
      }
      return ns / (kSteps * kReqs);
    });
    // The same 256 requests one call pair at a time, for comparison (same cache footprint).
    bench("three-group decode, 256 requests by single calls, per request", [&] {
      for (size_t q = 0; q < kReqs; ++q) c.free(std::span(flat).subspan(q * 3, 3));
      for (size_t q = 0; q < kReqs; ++q) c.acquire(std::span(flat).subspan(q * 3, 3), 8192);
      constexpr int kSteps = 20;
      double ns = 0;
      for (int i = 0; i < kSteps; ++i) {
        for (size_t q = 0; q < kReqs; ++q) fronts[q] = store[q * 3].extent();
        auto t0 = Clock::now();
        for (size_t q = 0; q < kReqs; ++q) {
          const auto ts = std::span(flat).subspan(q * 3, 3);
          c.acquire(ts, 1);
          c.reclaim_expired(ts, fronts[q]);
        }
        ns += ns_since(t0);
      }
      return ns / (kSteps * kReqs);
    });
  }

  {  // copy 1024 page ids out
    BlockPool pool(kPoolPages);
    warm(pool);
    SlidingWindowManager m(8, 12, 0);
    BlockTable t;
    m.acquire(pool, t, 8192);
    std::vector<int32_t> out(1024);
    bench("copy 1024 page ids out", [&] {
      constexpr int kOps = 10000;
      auto t0 = Clock::now();
      for (int i = 0; i < kOps; ++i) {
        const auto ids = t.page_ids();
        std::memcpy(out.data(), ids.data(), ids.size_bytes());
        keep(out[0]);
      }
      return ns_since(t0) / kOps;
    });
  }

  step_plan();
  prefix_caching();
  events_on_off();

  {  // a 100 000-step decode loop, live-tail group, one run
    BlockPool pool(kPoolPages);
    warm(pool);
    SlidingWindowManager m(8, 12, 256);
    BlockTable t;
    std::vector<double> v;
    for (int r = 0; r < 5; ++r) {
      m.free(pool, t);
      m.acquire(pool, t, 8192);
      constexpr int kSteps = 100000;
      auto t0 = Clock::now();
      for (int i = 0; i < kSteps; ++i) {
        const int64_t f = t.extent();
        m.acquire(pool, t, 1);
        m.reclaim_expired(pool, t, f);
      }
      v.push_back(ns_since(t0));
    }
    const double total = median(v);
    report("100000-step decode loop live-tail, total", total);
    report("100000-step decode loop live-tail, per step", total / 100000);
  }
  return 0;
}
