// A complete engine loop on livetail's C++ API: step planning, admission with prefix hits
// (device and host tier), naming, offload, reclaim, events, and the error model.
// docs/cpp.md walks through it; tests/test_cmake_package.py builds it against the CMake
// package, runs it and checks every line it prints.
#include <livetail/livetail.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

namespace {

using livetail::BlockPool;
using livetail::BlockTable;
using livetail::Coordinator;
using livetail::GroupKind;
using livetail::Key;

constexpr int64_t kChunk = 8;   // prefill chunk, in tokens
constexpr int64_t kDecode = 2;  // tokens each request generates

struct Request {
  int id = 0;
  int arrival = 0;  // the step it arrives at
  std::vector<uint32_t> prompt;
  std::vector<Key> keys;  // page_keys(prompt, base): what prefix caching matches on
  BlockTable full, conv;  // one table per group, in group order
  int64_t done = 0;       // tokens computed

  std::vector<BlockTable*> tables() { return {&full, &conv}; }
  int64_t length() const { return static_cast<int64_t>(prompt.size()); }
  int64_t total() const { return length() + kDecode; }
  // What the next step computes: a prefill chunk, or one decode token.
  int64_t next() const { return done < length() ? std::min(kChunk, length() - done) : 1; }
};

std::vector<uint32_t> tokens(uint32_t first, int64_t n) {
  std::vector<uint32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(first + static_cast<uint32_t>(i));
  return t;
}

// Events: counts keys stored and removed on one tier, then empties the pool's queue.
struct EventCount {
  int64_t stored = 0, removed = 0;
};
void drain(BlockPool& pool, EventCount& c) {
  for (const BlockPool::Event& e : pool.events()) {
    if (e.kind == BlockPool::EventKind::stored) c.stored += static_cast<int64_t>(e.key_count);
    if (e.kind == BlockPool::EventKind::removed) c.removed += static_cast<int64_t>(e.key_count);
  }
  pool.clear_events();
}

int run_engine() {
  // Groups: full attention (B = 8) and a conv group (B = 2, kernel width 3) with live tail:
  // the conv kernel reads the chunk from the activations (README, "When live tail is safe").
  BlockPool pool(24, /*retention=*/true, /*events=*/true);
  livetail::HostPool host(32, /*events=*/true);
  Coordinator coord({{GroupKind::full, 8}, {GroupKind::sliding, 2, 3, true}}, pool, &host);
  const int64_t base = coord.base_block_size();  // 2: one key per 2 tokens

  // Four requests. 3 (200 tokens) cannot fit the pool even alone: it runs until it is the
  // top request, then is rejected. 4 shares 1's first 16 tokens but arrives after 1's names
  // are gone; it is preempted while 3 grows, and comes back through the host copies of its
  // own pages.
  std::deque<std::unique_ptr<Request>> arriving, waiting, running;
  const std::vector<std::vector<uint32_t>> prompts = {
      tokens(100, 24), tokens(500, 40), tokens(900, 200), tokens(100, 16)};
  const std::vector<int> arrivals = {0, 0, 1, 14};
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = std::make_unique<Request>();
    r->id = static_cast<int>(i + 1);
    r->arrival = arrivals[i];
    r->prompt = prompts[i];
    r->keys = livetail::page_keys(r->prompt, base);
    r->prompt.push_back(7);  // one token past the keys: a hit never covers the whole prompt
    arriving.push_back(std::move(r));
  }
  EventCount gpu, cpu;
  int64_t finished = 0, rejected = 0, preempted = 0, loaded = 0, offloaded = 0, hits = 0;
  for (int step = 0; !arriving.empty() || !waiting.empty() || !running.empty(); ++step) {
    while (!arriving.empty() && arriving.front()->arrival <= step) {
      waiting.push_back(std::move(arriving.front()));
      arriving.pop_front();
    }
    // 1. plan: every running request asks for its next chunk or decode token.
    std::vector<BlockTable*> flat;
    std::vector<int64_t> want;
    for (auto& r : running) {
      for (BlockTable* t : r->tables()) flat.push_back(t);
      want.push_back(r->next());
    }
    livetail::StepPlan plan = coord.plan_step(flat, want);
    if (!plan.top_fits()) {  // cannot fit even alone: reject it rather than retry forever
      std::printf("step %d: reject request %d\n", step, running.front()->id);
      coord.free(running.front()->tables());
      running.pop_front();
      ++rejected;
      continue;
    }
    // 2. apply: frees the preempted requests, acquires for the stepped ones; cannot fail.
    coord.apply_step(plan);
    const auto stepped = static_cast<size_t>(plan.stepped());
    while (running.size() > stepped) {  // preempted: back to the front of the queue
      std::printf("step %d: preempt request %d\n", step, running.back()->id);
      running.back()->done = 0;  // its tables were freed; a prefix hit brings it back
      waiting.push_front(std::move(running.back()));
      running.pop_back();
      ++preempted;
    }
    // 3. admit: match, charge exactly, claim every hit before any acquire.
    int64_t room = plan.free_after();
    std::vector<Request*> admitted;
    std::vector<livetail::LoadPlan> loads;
    while (!waiting.empty()) {
      Request& r = *waiting.front();
      const livetail::PrefixMatch m = coord.match_prefix(r.keys);
      const int64_t first = std::min(kChunk, r.length() - m.num_tokens());
      const int64_t charge = coord.blocks_consumed_by_claim(m) +
                             coord.blocks_needed_for_sequential(r.tables(), first, 1);
      if (charge > room) break;
      room -= charge;
      int64_t from_host = 0;
      if (std::optional<livetail::LoadPlan> load = coord.claim(r.tables(), m)) {
        from_host = load->num_pages();  // copy load->host_pages()[i] -> device_pages()[i] here
        loads.push_back(std::move(*load));
      }
      std::printf("step %d: admit request %d, hit %lld tokens, %lld pages from the host\n",
                  step, r.id, static_cast<long long>(m.num_tokens()),
                  static_cast<long long>(from_host));
      loaded += from_host;
      r.done = m.num_tokens();  // the hit's tokens are computed already
      hits += m.num_tokens();
      admitted.push_back(&r);
      running.push_back(std::move(waiting.front()));
      waiting.pop_front();
    }
    for (Request* r : admitted) {
      if (!coord.acquire(r->tables(), r->next())) throw std::logic_error("the charge was exact");
    }
    for (livetail::LoadPlan& load : loads) coord.complete_load(load);  // copies are done
    // 4. forward: the kernels read full.page_ids() and conv.page_ids() (holes are 0).
    // 5. name, offload, reclaim, finish.
    for (size_t i = 0; i < running.size(); ++i) {
      Request& r = *running[i];
      r.done += r.next();
      coord.cache_full_blocks(r.tables(), r.keys, r.done);  // before the reclaim
      if (std::optional<livetail::OffloadPlan> copy = coord.plan_offload(r.tables(), r.done)) {
        offloaded += copy->num_pages();  // copy device_pages()[i] -> host_pages()[i] here
        coord.complete_offload(*copy);
      }
      coord.reclaim_expired(r.tables(), r.done);
    }
    for (size_t i = running.size(); i-- > 0;) {
      if (running[i]->done == running[i]->total()) {
        coord.free(running[i]->tables());
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
        ++finished;
      }
    }
    // 6. events: what a publisher would send to routers.
    drain(pool, gpu);
    drain(host, cpu);
    std::printf("step %d: running %zu waiting %zu pinned %lld free %lld\n", step,
                running.size(), waiting.size(), static_cast<long long>(pool.num_pinned()),
                static_cast<long long>(pool.num_free()));
  }
  std::printf("finished %lld rejected %lld preempted %lld\n", static_cast<long long>(finished),
              static_cast<long long>(rejected), static_cast<long long>(preempted));
  std::printf("hit tokens %lld offloaded %lld loaded %lld\n", static_cast<long long>(hits),
              static_cast<long long>(offloaded), static_cast<long long>(loaded));
  std::printf("events GPU stored %lld removed %lld, CPU stored %lld removed %lld\n",
              static_cast<long long>(gpu.stored), static_cast<long long>(gpu.removed),
              static_cast<long long>(cpu.stored), static_cast<long long>(cpu.removed));
  std::printf("pool free %lld of %lld, host free %lld of %lld\n",
              static_cast<long long>(pool.num_free()),
              static_cast<long long>(pool.num_blocks() - 1),
              static_cast<long long>(host.num_free()),
              static_cast<long long>(host.num_blocks() - 1));
  return 0;
}

// The error model: bad input throws std::invalid_argument and changes nothing; running out
// of pages is a return value, never an exception.
void error_model() {
  BlockPool pool(8);
  livetail::HostPool host(1);  // no usable host page
  Coordinator coord({{GroupKind::full, 2}, {GroupKind::sliding, 2, 3, true}}, pool, &host);
  BlockTable a0, a1;
  std::vector<BlockTable*> a{&a0, &a1};
  auto report = [&](const char* what, auto&& call) {
    try {
      call();
      std::printf("%s: no exception\n", what);
    } catch (const std::invalid_argument&) {
      std::printf("%s: invalid_argument, free %lld, extent %lld\n", what,
                  static_cast<long long>(pool.num_free()), static_cast<long long>(a0.extent()));
    }
  };
  report("negative count", [&] { coord.acquire(a, -1); });
  std::printf("acquire 20 tokens: %s\n", coord.acquire(a, 20) ? "true" : "false");
  std::printf("acquire 6 tokens: %s\n", coord.acquire(a, 6) ? "true" : "false");
  report("frontier past the extent", [&] { coord.reclaim_expired(a, 7); });
  report("same table twice", [&] { coord.free(std::vector<BlockTable*>{&a0, &a0}); });
  const std::vector<Key> keys = livetail::page_keys(tokens(1, 6), coord.base_block_size());
  coord.cache_full_blocks(a, keys, 6);
  std::printf("plan_offload with a full host: %s\n",
              coord.plan_offload(a, 6).has_value() ? "a plan" : "none");
  std::printf("reset_names while a named page is pinned: %s\n",
              pool.reset_names() ? "true" : "false");
  const int64_t want = 2;
  livetail::StepPlan plan = coord.plan_step(a, std::span(&want, 1));
  std::printf("reclaimed %lld\n", static_cast<long long>(coord.reclaim_expired(a, 6)));
  report("stale plan", [&] { coord.apply_step(plan); });  // the reclaim changed the pool
  const livetail::PrefixMatch m = coord.match_prefix(keys);
  report("claim into tables in use", [&] { coord.claim(a, m); });
  coord.free(a);
  std::printf("freed: free %lld\n", static_cast<long long>(pool.num_free()));
  report("pool of 0 pages", [] { BlockPool bad(0); });
}

}  // namespace

int main() {
  const int rc = run_engine();
  error_model();
  return rc;
}
