// net/kafka/round_trip.h
//
// Checks behind net/kafka/testing.h's MessageCase table.
#pragma once

#include <fmt/format.h>

#include <string>

#include "net/kafka/message.h"
#include "net/kafka/test_random.h"

namespace brook::net {

template <typename M>
std::string round_trip(uint64_t seed, int16_t version) {
  TestRandom rnd(seed);
  M m;
  randomize(m, version, rnd, 0);
  const size_t size = encoded_size(m, version);
  auto bytes = encode(m, version);
  if (!bytes.ok()) return fmt::format("encode: {}", std::string(bytes.status().message()));
  if (bytes->size() != size) {
    return fmt::format("size() says {} bytes, encode wrote {}", size, bytes->size());
  }
  auto back = decode<M>(bytes->linearize(), version);
  if (!back.ok()) return fmt::format("decode: {}", std::string(back.status().message()));
  if (!(*back == m)) {
    return fmt::format("decoded value differs\n  sent: {}\n  got:  {}", to_string(m),
                       to_string(*back));
  }
  // Re-encoding the decoded value gives the same bytes.
  auto again = encode(*back, version);
  if (!again.ok() || again->to_string() != bytes->to_string()) return "re-encoding differs";
  return {};
}

template <typename M>
io::BufferChain sample(uint64_t seed, int16_t version) {
  TestRandom rnd(seed);
  M m;
  randomize(m, version, rnd, 0);
  auto bytes = encode(m, version);
  return bytes.ok() ? *std::move(bytes) : io::BufferChain();
}

template <typename M>
absl::Status decode_status(const io::Buffer& bytes, int16_t version) {
  return decode<M>(bytes, version).status();
}

}  // namespace brook::net
