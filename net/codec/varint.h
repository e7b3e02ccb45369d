// net/codec/varint.h
//
// Kafka's variable-length integers (KIP-98 record format, KIP-482 flexible
// message versions). An unsigned varint is base-128, least significant group
// first, the high bit of each byte saying "more bytes follow". The signed
// varint (int32) and varlong (int64) zig-zag the value first, so small
// magnitudes of either sign stay short: 0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3.
//
// Decoding follows Kafka's ByteUtils exactly, so Brook accepts what a Kafka
// broker accepts and rejects what it rejects:
//   * at most 5 bytes for a 32-bit value and 10 for a 64-bit one; a byte past
//     that limit (the last allowed byte still has its continuation bit) is an
//     error;
//   * non-minimal encodings (0x80 0x00 for 0) are accepted;
//   * bits of the last allowed byte that do not fit the type are dropped.
//
// Everything here is pure and thread-safe. The read_* functions are the hot
// path (record parsing): inline, no allocation, 0 bytes consumed on malformed
// input. The decode_* functions wrap them and say why the input is malformed.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace brook::codec {

inline constexpr size_t kVarint32BytesMax = 5;   // ceil(32 / 7)
inline constexpr size_t kVarint64BytesMax = 10;  // ceil(64 / 7)

// ---------------------------------------------------------------------------
// Zig-zag.

inline constexpr uint32_t zigzag_encode32(int32_t v) {
  return (static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31);
}
inline constexpr int32_t zigzag_decode32(uint32_t u) {
  return static_cast<int32_t>((u >> 1) ^ (0u - (u & 1)));
}
inline constexpr uint64_t zigzag_encode64(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline constexpr int64_t zigzag_decode64(uint64_t u) {
  return static_cast<int64_t>((u >> 1) ^ (0ull - (u & 1)));
}

// ---------------------------------------------------------------------------
// Sizes: the number of bytes encode_* writes for a value.

inline constexpr size_t size_of_unsigned_varint(uint32_t v) {
  return (static_cast<size_t>(std::bit_width(v | 1u)) + 6) / 7;
}
inline constexpr size_t size_of_unsigned_varlong(uint64_t v) {
  return (static_cast<size_t>(std::bit_width(v | 1u)) + 6) / 7;
}
inline constexpr size_t size_of_varint(int32_t v) {
  return size_of_unsigned_varint(zigzag_encode32(v));
}
inline constexpr size_t size_of_varlong(int64_t v) {
  return size_of_unsigned_varlong(zigzag_encode64(v));
}

// ---------------------------------------------------------------------------
// Encoding. Each writes the minimal encoding and returns the bytes written.
// REQUIRES: `out` has room for size_of_*(v) bytes (kVarint32BytesMax or
// kVarint64BytesMax always suffice).

inline size_t encode_unsigned_varlong(uint64_t v, std::byte* out) {
  size_t i = 0;
  while (v >= 0x80) {
    out[i++] = static_cast<std::byte>(v | 0x80);
    v >>= 7;
  }
  out[i++] = static_cast<std::byte>(v);
  return i;
}

inline size_t encode_unsigned_varint(uint32_t v, std::byte* out) {
  if (v < 0x80) [[likely]] {
    out[0] = static_cast<std::byte>(v);
    return 1;
  }
  return encode_unsigned_varlong(v, out);
}

inline size_t encode_varint(int32_t v, std::byte* out) {
  return encode_unsigned_varint(zigzag_encode32(v), out);
}
inline size_t encode_varlong(int64_t v, std::byte* out) {
  return encode_unsigned_varlong(zigzag_encode64(v), out);
}

// ---------------------------------------------------------------------------
// Hot-path decoding. Each reads one value from the front of `in`, stores it in
// *value and returns the bytes consumed (1 to the type's maximum), or returns
// 0 and leaves *value untouched when `in` is truncated or the encoding is too
// long. Never reads outside `in`.

namespace detail {

// Shared loop for the multi-byte case. Kafka's readVarint / readVarlong drop
// the bits of the last allowed byte that do not fit; the shifts do the same.
template <typename T, size_t kBytesMax>
inline size_t read_unsigned_slow(std::span<const std::byte> in, T* value) {
  const size_t limit = in.size() < kBytesMax ? in.size() : kBytesMax;
  T result = 0;
  for (size_t i = 0; i < limit; ++i) {
    const auto b = static_cast<uint8_t>(in[i]);
    result |= static_cast<T>(static_cast<T>(b & 0x7f) << (7 * i));
    if (b < 0x80) {
      *value = result;
      return i + 1;
    }
  }
  return 0;
}

// The 8 bytes at p as a little-endian word (byte-swapped on big-endian hosts).
inline uint64_t load_le64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// Packs the low 7 bits of each byte of `word` into one 56-bit value (byte 0
// lowest), without branches: pairs of bytes, then pairs of 14-bit groups,
// then pairs of 28-bit groups.
inline uint64_t gather7(uint64_t word) {
  uint64_t x = word & 0x7f7f7f7f7f7f7f7full;
  x = (x & 0x007f007f007f007full) | ((x & 0x7f007f007f007f00ull) >> 1);
  x = (x & 0x00003fff00003fffull) | ((x & 0x3fff00003fff0000ull) >> 2);
  x = (x & 0x000000000fffffffull) | ((x & 0x0fffffff00000000ull) >> 4);
  return x;
}

}  // namespace detail

inline size_t read_unsigned_varint(std::span<const std::byte> in, uint32_t* value) {
  if (in.size() >= 8) [[likely]] {
    const uint64_t word = detail::load_le64(in.data());
    // A clear high bit ends the varint; a 32-bit one must end in 5 bytes.
    const uint64_t stops = ~word & 0x8080808080ull;
    if (stops == 0) return 0;
    const int stop_bit = std::countr_zero(stops);
    // Kafka keeps the low 32 bits of the fifth byte's contribution.
    *value = static_cast<uint32_t>(detail::gather7(word & ((2ull << stop_bit) - 1)));
    return static_cast<size_t>(stop_bit + 1) / 8;
  }
  return detail::read_unsigned_slow<uint32_t, kVarint32BytesMax>(in, value);
}

inline size_t read_unsigned_varlong(std::span<const std::byte> in, uint64_t* value) {
  if (in.size() >= 8) [[likely]] {
    const uint64_t word = detail::load_le64(in.data());
    // Values below 2^56 end within the word; longer ones take the loop.
    const uint64_t stops = ~word & 0x8080808080808080ull;
    if (stops != 0) [[likely]] {
      const int stop_bit = std::countr_zero(stops);
      *value = detail::gather7(word & ((2ull << stop_bit) - 1));
      return static_cast<size_t>(stop_bit + 1) / 8;
    }
  }
  return detail::read_unsigned_slow<uint64_t, kVarint64BytesMax>(in, value);
}

inline size_t read_varint(std::span<const std::byte> in, int32_t* value) {
  uint32_t u = 0;
  const size_t n = read_unsigned_varint(in, &u);
  if (n != 0) *value = zigzag_decode32(u);
  return n;
}

inline size_t read_varlong(std::span<const std::byte> in, int64_t* value) {
  uint64_t u = 0;
  const size_t n = read_unsigned_varlong(in, &u);
  if (n != 0) *value = zigzag_decode64(u);
  return n;
}

// ---------------------------------------------------------------------------
// Checked decoding: the value and the bytes consumed, or
//   OutOfRange      when `in` ends inside the encoding (more bytes may come),
//   InvalidArgument when the encoding is longer than the type allows.

template <typename T>
struct Decoded {
  T value;
  size_t bytes;
};

// Why read_* returned 0 for `in`, given the type's byte limit. Out of line:
// only malformed input gets here.
absl::Status varint_error(std::span<const std::byte> in, size_t bytes_max);

inline absl::StatusOr<Decoded<uint32_t>> decode_unsigned_varint(std::span<const std::byte> in) {
  uint32_t v = 0;
  const size_t n = read_unsigned_varint(in, &v);
  if (n == 0) [[unlikely]] return varint_error(in, kVarint32BytesMax);
  return Decoded<uint32_t>{v, n};
}

inline absl::StatusOr<Decoded<uint64_t>> decode_unsigned_varlong(std::span<const std::byte> in) {
  uint64_t v = 0;
  const size_t n = read_unsigned_varlong(in, &v);
  if (n == 0) [[unlikely]] return varint_error(in, kVarint64BytesMax);
  return Decoded<uint64_t>{v, n};
}

inline absl::StatusOr<Decoded<int32_t>> decode_varint(std::span<const std::byte> in) {
  int32_t v = 0;
  const size_t n = read_varint(in, &v);
  if (n == 0) [[unlikely]] return varint_error(in, kVarint32BytesMax);
  return Decoded<int32_t>{v, n};
}

inline absl::StatusOr<Decoded<int64_t>> decode_varlong(std::span<const std::byte> in) {
  int64_t v = 0;
  const size_t n = read_varlong(in, &v);
  if (n == 0) [[unlikely]] return varint_error(in, kVarint64BytesMax);
  return Decoded<int64_t>{v, n};
}

}  // namespace brook::codec
