// net/kafka/test_random.h
//
// Random values for generated message instances in tests: small strings and
// arrays, every integer width, finite doubles. Deterministic per seed.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "io/buffer.h"
#include "io/random.h"
#include "net/kafka/wire.h"

namespace brook::net {

class TestRandom {
 public:
  explicit TestRandom(uint64_t seed) : random_(seed) {}

  uint64_t next() { return random_.next_u64(); }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  bool chance(int one_in) { return below(static_cast<size_t>(one_in)) == 0; }

  // Integers favour edge values; doubles stay finite so they compare equal.
  template <typename T>
    requires std::is_integral_v<T>
  void fill(T& x) {
    switch (below(4)) {
      case 0: x = 0; break;
      case 1: x = static_cast<T>(-1); break;
      default: x = static_cast<T>(next()); break;
    }
  }
  void fill(bool& x) { x = chance(2); }
  void fill(double& x) { x = static_cast<double>(static_cast<int64_t>(next() >> 11)) / 1024.0; }
  void fill(Uuid& x) {
    for (auto& b : x.bytes) b = static_cast<uint8_t>(next());
  }

  std::string text(size_t max_len) {
    std::string s(below(max_len + 1), ' ');
    for (char& c : s) c = static_cast<char>(next());
    return s;
  }
  io::Buffer bytes(size_t max_len) {
    io::Buffer b = io::Buffer::allocate(below(max_len + 1));
    for (size_t i = 0; i < b.size(); ++i) b.mutable_data()[i] = static_cast<std::byte>(next());
    return b;
  }

 private:
  io::Random random_;
};

}  // namespace brook::net
