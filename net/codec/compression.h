// net/codec/compression.h
//
// Kafka's record-batch compression codecs: the payload of a batch whose
// attributes name a codec (bits 0-2) is one compressed stream of its records.
// Each codec writes and reads what Kafka's clients and brokers do:
//
//   gzip    a gzip stream (RFC 1952). Decompression accepts concatenated
//           members, as Java's GZIPInputStream does; anything else after a
//           member is an error.
//   snappy  compress writes snappy-java's "xerial" framing, as the Java
//           producer does: the magic 82 'S' 'N' 'A' 'P' 'P' 'Y' 00, int32 BE
//           version 1, int32 BE compatible version 1, then blocks of int32 BE
//           compressed length + one raw snappy block of at most 32 KiB of
//           input. Decompression accepts that framing (also several streams
//           concatenated) and a plain raw snappy block (as librdkafka may send).
//   lz4     the standard LZ4 frame format (magic v2 batches; the broken
//           header checksum of magic v0/v1 KafkaLZ4 is not supported).
//           compress writes independent 64 KiB blocks without checksums or
//           content size, like Kafka's KafkaLZ4BlockOutputStream.
//           Decompression accepts any standard frame, several in a row.
//   zstd    standard zstd frames, several in a row, with or without a
//           content size.
//
// Decompression never holds more than `max_output` bytes of output (plus one,
// which proves the overrun): the output grows as it is produced, and a size a
// header claims sizes a first allocation only when it is within the cap.
// Library-internal state is bounded separately (LZ4 at most 4 MiB per block;
// zstd's window at most max(8 MiB, max_output), and never above 2^27 bytes,
// the limit Kafka's zstd-jni applies by default).
//
// Errors:
//   InvalidArgument    unknown codec, or a level outside the codec's range;
//   DataLoss           malformed, corrupt or truncated compressed input
//                      (the message names the codec and the library's reason);
//   ResourceExhausted  the output would exceed max_output.
//
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "io/buffer.h"

namespace brook::codec {

// The record batch attribute values (attributes & kCompressionAttributeMask).
enum class Compression : uint8_t { kNone = 0, kGzip = 1, kSnappy = 2, kLz4 = 3, kZstd = 4 };

inline constexpr int16_t kCompressionAttributeMask = 0x07;

// Selects each codec's default level: gzip 6 (zlib's default, as Kafka's
// Deflater.DEFAULT_COMPRESSION), lz4 the fast compressor, zstd 3.
inline constexpr int kCompressionLevelDefault = std::numeric_limits<int>::min();

// The codec named by a batch's attributes; InvalidArgument for ids 5 to 7.
absl::StatusOr<Compression> compression_from_attributes(int16_t attributes);

// Kafka's name for the codec (the compression.type value): "none", "gzip",
// "snappy", "lz4", "zstd"; "unknown" for a value outside the enum.
std::string_view compression_name(Compression compression);

// Compresses `input` into one stream of the codec. Levels, besides
// kCompressionLevelDefault: gzip -1 to 9; lz4 0 to 17 (below 3 the fast
// compressor, 3 and up the high-compression one, above 12 the same as 12);
// zstd ZSTD_minCLevel() to ZSTD_maxCLevel(). Snappy and none have no levels
// and ignore `level`. Compression::kNone returns a copy of `input`.
absl::StatusOr<io::Buffer> compress(Compression compression, std::span<const std::byte> input,
                                    int level = kCompressionLevelDefault);

// Decompresses one stream of the codec (see the file comment for what each
// accepts). Empty input is DataLoss for every codec but none.
absl::StatusOr<io::Buffer> decompress(Compression compression, std::span<const std::byte> input,
                                      size_t max_output);

}  // namespace brook::codec
