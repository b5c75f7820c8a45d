#include "livetail/prefix.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>

#include "fail.h"
#include "livetail/geometry.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define LIVETAIL_SHA_NI 1
#endif

namespace livetail {

using detail::fail;

namespace {

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the cube roots of
// the first 64 primes; section 5.3.3: the square roots of the first 8.
alignas(16) constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
constexpr uint32_t kInitial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

inline uint32_t load_be32(const uint8_t* p) noexcept {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

inline void store_be32(uint8_t* p, uint32_t v) noexcept {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

// FIPS 180-4 section 6.2.2, one 64-byte block at a time.
void compress_portable(uint32_t* state, const uint8_t* p, size_t blocks) noexcept {
  for (; blocks != 0; --blocks, p += 64) {
    uint32_t w[64];
    for (size_t t = 0; t < 16; ++t) w[t] = load_be32(p + 4 * t);
    for (int t = 16; t < 64; ++t) {
      const uint32_t s0 = std::rotr(w[t - 15], 7) ^ std::rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const uint32_t s1 = std::rotr(w[t - 2], 17) ^ std::rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int t = 0; t < 64; ++t) {
      const uint32_t t1 = h + (std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25)) +
                          ((e & f) ^ (~e & g)) + kRound[t] + w[t];
      const uint32_t t2 =
          (std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state[0] += a, state[1] += b, state[2] += c, state[3] += d;
    state[4] += e, state[5] += f, state[6] += g, state[7] += h;
  }
}

#if LIVETAIL_SHA_NI
// The same function with the SHA extensions: SHA256RNDS2 runs two rounds on the state held
// as ABEF and CDGH, SHA256MSG1/MSG2 extend the message schedule four words at a time.
__attribute__((target("sha,sse4.1"))) void compress_sha_ni(uint32_t* state, const uint8_t* p,
                                                           size_t blocks) noexcept {
  const __m128i be = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state));      // A B C D
  __m128i st1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4));  // E F G H
  tmp = _mm_shuffle_epi32(tmp, 0xB1);
  st1 = _mm_shuffle_epi32(st1, 0x1B);
  __m128i st0 = _mm_alignr_epi8(tmp, st1, 8);  // ABEF
  st1 = _mm_blend_epi16(st1, tmp, 0xF0);       // CDGH
  for (; blocks != 0; --blocks, p += 64) {
    const __m128i abef = st0, cdgh = st1;
    __m128i w[4];  // schedule words 4g .. 4g+3 of the last four groups g
#pragma GCC unroll 16
    for (size_t g = 0; g < 16; ++g) {
      __m128i m;
      if (g < 4) {
        m = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * g)), be);
      } else {
        m = _mm_sha256msg1_epu32(w[(g - 4) & 3], w[(g - 3) & 3]);
        m = _mm_add_epi32(m, _mm_alignr_epi8(w[(g - 1) & 3], w[(g - 2) & 3], 4));
        m = _mm_sha256msg2_epu32(m, w[(g - 1) & 3]);
      }
      w[g & 3] = m;
      __m128i k =
          _mm_add_epi32(m, _mm_load_si128(reinterpret_cast<const __m128i*>(kRound + 4 * g)));
      st1 = _mm_sha256rnds2_epu32(st1, st0, k);
      k = _mm_shuffle_epi32(k, 0x0E);
      st0 = _mm_sha256rnds2_epu32(st0, st1, k);
    }
    st0 = _mm_add_epi32(st0, abef);
    st1 = _mm_add_epi32(st1, cdgh);
  }
  tmp = _mm_shuffle_epi32(st0, 0x1B);     // F E B A
  st1 = _mm_shuffle_epi32(st1, 0xB1);     // D C H G
  st0 = _mm_blend_epi16(tmp, st1, 0xF0);  // A B C D
  st1 = _mm_alignr_epi8(st1, tmp, 8);     // E F G H
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), st0);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), st1);
}

bool cpu_has_sha_ni() noexcept {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1)) return false;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}

const bool kHasShaNi = cpu_has_sha_ni();
#else
constexpr bool kHasShaNi = false;
#endif

}  // namespace

Sha256::Sha256(bool accelerated) noexcept : compress_(compress_portable) {
#if LIVETAIL_SHA_NI
  if (accelerated && kHasShaNi) compress_ = compress_sha_ni;
#else
  (void)accelerated;
#endif
  std::memcpy(h_, kInitial, sizeof h_);
}

const char* Sha256::implementation() noexcept { return kHasShaNi ? "sha-ni" : "portable"; }

void Sha256::update(const void* data, size_t len) noexcept {
  if (len == 0) return;  // data may be null then (an empty span), which memcpy must not see
  auto p = static_cast<const uint8_t*>(data);
  len_ += len;
  if (fill_ != 0) {
    const size_t take = std::min(64 - fill_, len);
    std::memcpy(buf_ + fill_, p, take);
    fill_ += take, p += take, len -= take;
    if (fill_ < 64) return;
    compress_(h_, buf_, 1);
    fill_ = 0;
  }
  if (len >= 64) {  // whole blocks straight from the input
    compress_(h_, p, len / 64);
    p += len / 64 * 64;
    len %= 64;
  }
  if (len != 0) std::memcpy(buf_, p, len);
  fill_ = len;
}

Key Sha256::digest() noexcept {
  const uint64_t bits = len_ * 8;
  buf_[fill_++] = 0x80;
  if (fill_ > 56) {  // no room for the length: pad this block and start another
    std::memset(buf_ + fill_, 0, 64 - fill_);
    compress_(h_, buf_, 1);
    fill_ = 0;
  }
  std::memset(buf_ + fill_, 0, 56 - fill_);
  store_be32(buf_ + 56, static_cast<uint32_t>(bits >> 32));
  store_be32(buf_ + 60, static_cast<uint32_t>(bits));
  compress_(h_, buf_, 1);
  Key out;
  for (size_t i = 0; i < 8; ++i) store_be32(out.data() + 4 * i, h_[i]);
  return out;
}

Key sha256(const void* data, size_t len) noexcept {
  Sha256 h;
  h.update(data, len);
  return h.digest();
}

std::vector<Key> page_keys(std::span<const uint32_t> tokens, int64_t base_block_size,
                           std::span<const uint8_t> salt) {
  if (base_block_size < 1 || base_block_size > geometry::INT32_MAX_TOKENS)
    fail("base_block_size", "must be in [1, 2**31 - 1], got " + std::to_string(base_block_size));
  const auto base = static_cast<size_t>(base_block_size);
  std::vector<Key> keys(tokens.size() / base);
  for (size_t j = 0; j < keys.size(); ++j) {
    Sha256 h;
    if (j != 0) h.update(keys[j - 1].data(), KEY_BYTES);
    const uint32_t* page = tokens.data() + j * base;
    if constexpr (std::endian::native == std::endian::little) {
      h.update(page, base * sizeof(uint32_t));  // already little-endian uint32
    } else {
      uint32_t le[64];
      for (size_t i = 0; i < base; i += 64) {
        const size_t n = std::min<size_t>(64, base - i);
        for (size_t k = 0; k < n; ++k) le[k] = __builtin_bswap32(page[i + k]);
        h.update(le, n * sizeof(uint32_t));
      }
    }
    h.update(salt.data(), salt.size());
    keys[j] = h.digest();
  }
  return keys;
}

void check_keys(std::span<const Key> keys) {
  const size_t n = keys.size();
  if (n < 2) return;
  // Open addressing at load <= 1/2; an entry is (32 bits of hash << 32 | index + 1), 0 = empty,
  // so only equal hashes read a key again. Keys are digests, so two of their words mixed make
  // a good hash (and any keys are still compared exactly).
  thread_local std::vector<uint64_t> table;
  const size_t size = std::bit_ceil(std::max<size_t>(2 * n, 16));
  table.assign(size, 0);
  const size_t mask = size - 1;
  auto hash = [](const Key& k) {
    uint64_t a, b;
    std::memcpy(&a, k.data(), 8);
    std::memcpy(&b, k.data() + 24, 8);
    return (a ^ std::rotl(b, 29)) * 0x9E3779B97F4A7C15ull;
  };
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = hash(keys[i]);
    const uint64_t tag = h & 0xFFFFFFFF00000000ull;
    for (size_t s = (h >> 32) & mask;; s = (s + 1) & mask) {
      const uint64_t e = table[s];
      if (e == 0) {
        table[s] = tag | (i + 1);  // n < 2**32: at most 2**27 bytes of keys per GiB
        break;
      }
      if ((e & 0xFFFFFFFF00000000ull) == tag && keys[(e & 0xFFFFFFFF) - 1] == keys[i])
        fail("keys", "must be pairwise distinct: keys[" + std::to_string((e & 0xFFFFFFFF) - 1) +
                         "] == keys[" + std::to_string(i) + "]");
    }
  }
}

}  // namespace livetail
