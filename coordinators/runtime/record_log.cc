// coordinators/runtime/record_log.cc
#include "coordinators/runtime/record_log.h"

#include <cstdint>
#include <cstdlib>

namespace brook::runtime {

int32_t java_string_hash(std::string_view s) {
  uint32_t h = 0;
  auto unit = [&](uint32_t u) { h = h * 31 + u; };
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    uint32_t cp = 0xFFFD;
    size_t len = 1;
    if (b < 0x80) {
      cp = b;
    } else if ((b & 0xE0) == 0xC0 && i + 1 < s.size()) {
      cp = ((b & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu);
      len = 2;
    } else if ((b & 0xF0) == 0xE0 && i + 2 < s.size()) {
      cp = ((b & 0x0Fu) << 12) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 6) |
           (static_cast<uint8_t>(s[i + 2]) & 0x3Fu);
      len = 3;
    } else if ((b & 0xF8) == 0xF0 && i + 3 < s.size()) {
      cp = ((b & 0x07u) << 18) | ((static_cast<uint8_t>(s[i + 1]) & 0x3Fu) << 12) |
           ((static_cast<uint8_t>(s[i + 2]) & 0x3Fu) << 6) | (static_cast<uint8_t>(s[i + 3]) & 0x3Fu);
      len = 4;
    }
    i += len;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      unit(0xD800 + (cp >> 10));
      unit(0xDC00 + (cp & 0x3FF));
    } else {
      unit(cp);
    }
  }
  return static_cast<int32_t>(h);
}

int32_t partition_for_key(std::string_view key, int32_t partitions) {
  // Utils.abs is Math.abs with Integer.MIN_VALUE taken to 0 (not the sign
  // bit cleared, as the producer's partitioner does with murmur2).
  const int32_t h = java_string_hash(key);
  return (h == INT32_MIN ? 0 : std::abs(h)) % partitions;
}

}  // namespace brook::runtime
