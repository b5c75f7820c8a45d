// The two hot loops of livetail.router.PrefixIndex (a router's index of many engines' names,
// semantics section 12), over arrays the Python class owns:
// - an open-addressing table of 64-bit block hashes to rows: 2^bits slots, each a pair
//   {hash, row}, row 0 = empty; hash h starts at slot (h * kRouterMul) >> (64 - bits) and
//   probes linearly;
// - section 8's greatest boundary for one engine, from a presence matrix (row, column) of
//   tier bits (nonzero: the name is on some tier that counts) and the rows of a prompt's keys.
// The Python class keeps a numpy version of each; tests compare the two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace livetail::router {

inline constexpr uint64_t kRouterMul = 0x9E3779B97F4A7C15ull;  // Fibonacci hashing

// rows[i] = the row of hashes[i], 0 if the table has none. table.size() == 2 << bits.
void lookup(std::span<const uint64_t> table, int bits, std::span<const uint64_t> hashes,
            std::span<int32_t> rows);

// Puts hashes (distinct, none in the table yet, rows >= 1) into free slots, in order; false
// (the hashes before the one that found none are placed) when the table is full.
bool place(std::span<uint64_t> table, int bits, std::span<const uint64_t> hashes,
           std::span<const int32_t> rows);

// One group of an engine: block size, slots it needs behind a boundary (-1: every slot, a
// full group; 0: none, a sliding group with W = 1), presence column (-1: none yet), and for a
// chunked group (semantics section 13.2) its slots per chunk C / B (resume 0): behind the
// boundary of b slots it needs b mod chunk slots. 0 for the other kinds.
struct GroupRule {
  int64_t size;
  int64_t resume;
  int64_t column;
  int64_t chunk;
};

struct Longest {
  int64_t num_tokens;  // the greatest boundary every group supports (0 if none)
  bool full_through;   // the engine has full groups, each present on every slot of the keys
};

// rows: the rows of keys 0 .. n-1 (keys of base pages); every rule's size is a multiple of
// base and divides lcm; lcm <= 2^31 - 1. `lcm` is the boundary step: the engine's alignment
// (semantics 13.9), the lcm of its page sizes or a multiple of it. The boundary T is a
// multiple of it, at most min(n * base, 2^31 - 1), and counts if every group supports it
// (semantics section 8).
Longest longest(std::span<const uint8_t> presence, size_t width, std::span<const int32_t> rows,
                int64_t base, int64_t lcm, std::span<const GroupRule> rules);

// longest for several engines of one base at once: engine e has lcm lcms[e] and the rules
// rules[ends[e-1] .. ends[e]) (ends[-1] = 0), each as for longest: one call (the binding
// checks the rows once) where a router would otherwise cross into C++ once per engine.
// (Gathering the keys' presence rows into a compact copy first was measured and dropped:
// 2.1M instructions against 1.5M for 8 engines of 8192 keys, and slower, docs/performance.md.)
#define LIVETAIL_ROUTER_LONGEST_MANY 1  // for code built against several versions
void longest_many(std::span<const uint8_t> presence, size_t width, std::span<const int32_t> rows,
                  int64_t base, std::span<const int64_t> lcms, std::span<const GroupRule> rules,
                  std::span<const size_t> ends, std::span<Longest> out);

}  // namespace livetail::router
