// io/random.h
//
// Random: every random choice in Brook comes from one of these. It is a
// seeded xoshiro256** generator: the simulator seeds one per node from the
// run's seed (so a run is a pure function of its seed); real backends seed it
// from the operating system once at start-up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "io/assert.h"

namespace brook::io {

class Random {
 public:
  explicit Random(uint64_t seed) { reseed(seed); }

  void reseed(uint64_t seed) {
    // splitmix64 expands the seed into the generator's state.
    for (uint64_t& word : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      word = z ^ (z >> 31);
    }
  }

  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n). REQUIRES: n > 0. Lemire's multiply-shift, unbiased.
  uint64_t uniform(uint64_t n) {
    BROOK_ASSERT(n > 0);
    unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = -n % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next_u64()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Uniform in [lo, hi]. REQUIRES: lo <= hi.
  int64_t uniform_range(int64_t lo, int64_t hi) {
    BROOK_ASSERT(lo <= hi);
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    if (span == UINT64_MAX) return static_cast<int64_t>(next_u64());
    return lo + static_cast<int64_t>(uniform(span + 1));
  }

  // Uniform in [0, 1).
  double unit() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  bool bernoulli(double p) { return unit() < p; }

  // Fisher-Yates over anything indexable, so a shuffle is the same on every
  // standard library (std::shuffle's algorithm is unspecified).
  template <typename Items>
  void shuffle(Items& items) {
    for (size_t i = items.size(); i > 1; --i) {
      using std::swap;
      swap(items[i - 1], items[uniform(i)]);
    }
  }

  // A fresh, independent stream (for giving a component its own generator).
  Random fork() { return Random(next_u64()); }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace brook::io
