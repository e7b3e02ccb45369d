// net/codec/endian.h
//
// Big-endian fixed-width integers, the byte order of every Kafka header
// field and of the storage formats (index entries, snapshots). Loads and
// stores are byte-wise, so they need no alignment and compile to one bswap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace brook::codec {

// REQUIRES: offset + sizeof(T) <= bytes.size() (the caller has checked it).
template <typename T>
  requires std::is_integral_v<T>
T load_be(std::span<const std::byte> bytes, size_t offset) {
  using U = std::make_unsigned_t<T>;
  U v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v = static_cast<U>((v << 8) | static_cast<U>(std::to_integer<uint8_t>(bytes[offset + i])));
  }
  return static_cast<T>(v);
}

// Writes sizeof(T) bytes at `out`.
template <typename T>
  requires std::is_integral_v<T>
void store_be(std::byte* out, T value) {
  using U = std::make_unsigned_t<T>;
  auto v = static_cast<U>(value);
  for (size_t i = sizeof(T); i > 0; --i) {
    out[i - 1] = static_cast<std::byte>(v & 0xff);
    v = static_cast<U>(v >> 8);
  }
}

}  // namespace brook::codec
