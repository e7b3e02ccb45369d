// fuzz/fuzz_support.h
//
// Helpers shared by the fuzz targets and the seed generator (header-only, no
// libFuzzer dependency):
//   * the response selector: the first 4 bytes of a fuzz_response input
//     choose the API and version, so every input names a valid pair;
//   * the round-trip oracle for generated messages: whatever decodes must
//     re-encode, and that encoding must be a fixed point.
#pragma once

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "io/assert.h"
#include "io/buffer.h"
#include "net/kafka/apis.h"
#include "net/kafka/message.h"

namespace brook::fuzz {

inline std::span<const std::byte> as_bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

inline uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>((static_cast<uint16_t>(p[0]) << 8) | p[1]);
}

// fuzz_response's selector: bytes 0-1 (big-endian) index all_apis() modulo
// its size; bytes 2-3 are the version's distance from the API's lowest
// version, modulo the number of versions.
inline constexpr size_t kResponseSelectorBytes = 4;

struct ResponseSelection {
  const net::ApiInfo* api;
  int16_t version;
};

// REQUIRES: kResponseSelectorBytes bytes at `p`.
inline ResponseSelection select_response(const uint8_t* p) {
  const auto apis = net::all_apis();
  BROOK_ASSERT(!apis.empty());
  const net::ApiInfo& api = apis[load_u16(p) % apis.size()];
  const int versions = api.max_version - api.min_version + 1;
  BROOK_ASSERT(versions > 0);
  const auto version = static_cast<int16_t>(api.min_version + load_u16(p + 2) % versions);
  return {&api, version};
}

// The selector bytes for (key, version). REQUIRES: a known key, a version in
// its range.
inline std::array<uint8_t, kResponseSelectorBytes> response_selector(int16_t key,
                                                                     int16_t version) {
  const auto apis = net::all_apis();
  for (size_t i = 0; i < apis.size(); ++i) {
    if (apis[i].key != key) continue;
    BROOK_ASSERT(version >= apis[i].min_version && version <= apis[i].max_version);
    const auto offset = static_cast<uint16_t>(version - apis[i].min_version);
    return {static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i),
            static_cast<uint8_t>(offset >> 8), static_cast<uint8_t>(offset)};
  }
  BROOK_UNREACHABLE();
}

// A message that decoded at `version` must encode at that version, decode
// again, and encode to the same bytes: the decoder accepts nothing the
// encoder cannot say, and nothing is lost or invented between them.
// Comparing encodings (not values) keeps NaN float64 fields comparable.
template <net::Message M>
void check_round_trip(const M& decoded, int16_t version) {
  absl::StatusOr<io::BufferChain> first = net::encode(decoded, version);
  BROOK_ASSERT_MSG(first.ok(), "{} v{} decoded but does not encode: {}", M::kName, version,
                   std::string(first.status().message()));
  const io::Buffer bytes = first->linearize();
  BROOK_ASSERT_EQ(bytes.size(), net::encoded_size(decoded, version));
  absl::StatusOr<M> again = net::decode<M>(bytes, version);
  BROOK_ASSERT_MSG(again.ok(), "{} v{} re-encoding does not decode: {}", M::kName, version,
                   std::string(again.status().message()));
  absl::StatusOr<io::BufferChain> second = net::encode(*again, version);
  BROOK_ASSERT(second.ok());
  BROOK_ASSERT_MSG(second->linearize() == bytes, "{} v{} encoding is not a fixed point",
                   M::kName, version);
}

}  // namespace brook::fuzz
