// livetail.router's hash-table probes and boundary search (native/include/livetail/router.h).
#include "livetail/router.h"

#include <algorithm>
#include <vector>

namespace livetail::router {

namespace {

constexpr int64_t kInt32Max = 2147483647;
constexpr size_t kAhead = 16;  // keys whose first slot is prefetched ahead of the probe

size_t first_slot(uint64_t h, int bits) {
  return static_cast<size_t>((h * kRouterMul) >> (64 - bits));
}

}  // namespace

void lookup(std::span<const uint64_t> table, int bits, std::span<const uint64_t> hashes,
            std::span<int32_t> rows) {
  const size_t mask = (size_t{1} << bits) - 1;
  const size_t n = hashes.size();
  for (size_t i = 0; i < n; ++i) {
    // Random slots of a table of millions: overlap the cache misses of the next keys.
    if (i + kAhead < n) __builtin_prefetch(&table[2 * first_slot(hashes[i + kAhead], bits)]);
    const uint64_t h = hashes[i];
    size_t p = first_slot(h, bits);
    int32_t row = 0;
    for (;;) {
      const uint64_t r = table[2 * p + 1];
      if (r == 0) break;
      if (table[2 * p] == h) {
        row = static_cast<int32_t>(r);
        break;
      }
      p = (p + 1) & mask;
    }
    rows[i] = row;
  }
}

bool place(std::span<uint64_t> table, int bits, std::span<const uint64_t> hashes,
           std::span<const int32_t> rows) {
  const size_t mask = (size_t{1} << bits) - 1;
  for (size_t i = 0; i < hashes.size(); ++i) {
    size_t p = first_slot(hashes[i], bits), probes = 0;
    while (table[2 * p + 1] != 0) {
      if (++probes > mask) return false;
      p = (p + 1) & mask;
    }
    table[2 * p] = hashes[i];
    table[2 * p + 1] = static_cast<uint64_t>(rows[i]);
  }
  return true;
}

Longest longest(std::span<const uint8_t> presence, size_t width, std::span<const int32_t> rows,
                int64_t base, int64_t lcm, std::span<const GroupRule> rules) {
  const auto n = static_cast<int64_t>(rows.size());
  const int64_t tokens = base > kInt32Max / std::max<int64_t>(n, 1) ? kInt32Max : n * base;
  int64_t m_max = std::min(tokens, kInt32Max) / lcm;  // boundaries m * lcm, m <= m_max
  auto present = [&](int64_t slot, int64_t k, int64_t column) {
    const auto row = static_cast<size_t>(rows[static_cast<size_t>((slot + 1) * k - 1)]);
    return presence[row * width + static_cast<size_t>(column)] != 0;
  };
  // Full groups: support is monotone, so the first slot missing caps every boundary.
  bool any_full = false, full_through = true;
  for (const GroupRule& g : rules) {
    if (g.resume >= 0) continue;
    any_full = true;
    if (g.column < 0) {
      m_max = 0;
      full_through = false;
      continue;
    }
    const int64_t k = g.size / base, slots = n / k;
    int64_t first = 0;
    while (first < slots && present(first, k, g.column)) ++first;
    full_through = full_through && first == slots;
    if (first < m_max * lcm / g.size) m_max = first * g.size / lcm;
  }
  for (const GroupRule& g : rules)
    if (g.resume > 0 && g.column < 0) m_max = 0;  // never named a page: no boundary above 0
  const Longest none{0, any_full && full_through};
  if (m_max == 0) return none;
  // Sliding and state groups: run[b] = present slots in a row ending at slot b - 1; the
  // window [max(0, b - R), b) is whole if run[b] >= min(b, R). Not monotone: try every m.
  thread_local std::vector<std::vector<int32_t>> runs;
  size_t partial = 0;
  for (const GroupRule& g : rules) {
    if (g.resume <= 0 && g.chunk == 0) continue;
    if (runs.size() <= partial) runs.emplace_back();
    std::vector<int32_t>& run = runs[partial++];
    const int64_t k = g.size / base, slots = m_max * lcm / g.size;
    run.assign(static_cast<size_t>(slots) + 1, 0);
    if (g.column < 0) continue;  // never named: every run is 0
    // Slot j's row is rows[(j + 1) * k - 1]: one index stepping by k, the run in a register.
    const auto column = static_cast<size_t>(g.column), step = static_cast<size_t>(k);
    size_t row = step - 1;
    int32_t length = 0;
    for (size_t j = 1; j <= static_cast<size_t>(slots); ++j, row += step) {
      length = presence[static_cast<size_t>(rows[row]) * width + column] != 0 ? length + 1 : 0;
      run[j] = length;
    }
  }
  for (int64_t m = m_max; m >= 1; --m) {
    bool ok = true;
    size_t at = 0;
    for (const GroupRule& g : rules) {
      if (g.resume <= 0 && g.chunk == 0) continue;
      const int64_t b = m * lcm / g.size;
      const int64_t need = g.chunk > 0 ? b % g.chunk : std::min(b, g.resume);
      ok = runs[at++][static_cast<size_t>(b)] >= need;
      if (!ok) break;
    }
    if (ok) return {m * lcm, none.full_through};
  }
  return none;
}

void longest_many(std::span<const uint8_t> presence, size_t width, std::span<const int32_t> rows,
                  int64_t base, std::span<const int64_t> lcms, std::span<const GroupRule> rules,
                  std::span<const size_t> ends, std::span<Longest> out) {
  size_t begin = 0;
  for (size_t e = 0; e < ends.size(); ++e) {
    out[e] = longest(presence, width, rows, base, lcms[e], rules.subspan(begin, ends[e] - begin));
    begin = ends[e];
  }
}

}  // namespace livetail::router
