// net/codec/compression_snappy.cc
//
// Snappy in Kafka comes in two shapes. The Java client wraps raw snappy blocks
// in snappy-java's stream framing ("xerial"):
//
//   header  82 53 4E 41 50 50 59 00   magic: 0x82 "SNAPPY" 0
//           00 00 00 01               int32 BE version (1)
//           00 00 00 01               int32 BE compatible version (1)
//   block   int32 BE length n, then n bytes: one raw snappy block
//   ...     (snappy-java compresses 32 KiB of input per block)
//
// A stream may be followed by another whole stream (snappy-java reads a block
// length equal to the first four magic bytes as the start of a new header).
// librdkafka writes either that framing or one plain raw snappy block, so a
// reader tells them apart by the magic. The version fields are not checked,
// as librdkafka does not check them.
//
// Raw snappy states its uncompressed length up front, so decompression first
// walks the framing, sums the blocks' lengths against max_output and only
// then allocates, once, exactly.
#include <snappy.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "io/status.h"
#include "net/codec/codec_impl.h"

namespace brook::codec::internal {
namespace {

constexpr std::array<uint8_t, 8> kXerialMagic = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
constexpr uint32_t kXerialVersion = 1;
constexpr uint32_t kXerialCompatibleVersion = 1;
constexpr size_t kXerialHeaderBytes = 8 + 4 + 4;
constexpr size_t kXerialLengthBytes = 4;
constexpr size_t kXerialBlockInputBytes = 32 * 1024;  // snappy-java's default block size

const char* as_chars(const std::byte* p) { return reinterpret_cast<const char*>(p); }

uint32_t load_be32(const std::byte* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | static_cast<uint32_t>(p[3]);
}

void store_be32(uint32_t v, std::byte* p) {
  p[0] = static_cast<std::byte>(v >> 24);
  p[1] = static_cast<std::byte>(v >> 16);
  p[2] = static_cast<std::byte>(v >> 8);
  p[3] = static_cast<std::byte>(v);
}

bool starts_with_magic(std::span<const std::byte> bytes) {
  return bytes.size() >= kXerialMagic.size() &&
         std::memcmp(bytes.data(), kXerialMagic.data(), kXerialMagic.size()) == 0;
}

// Walks the blocks of a xerial stream. REQUIRES: the input starts with the magic.
class XerialReader {
 public:
  explicit XerialReader(std::span<const std::byte> input) : input_(input) {}

  // The next raw block, std::nullopt at the end, or DataLoss.
  absl::StatusOr<std::optional<std::span<const std::byte>>> next() {
    for (;;) {
      const std::span<const std::byte> rest = input_.subspan(pos_);
      if (rest.empty()) return std::nullopt;
      if (starts_with_magic(rest)) {  // a (further) stream header
        if (rest.size() < kXerialHeaderBytes) {
          return absl::DataLossError("snappy: truncated xerial header");
        }
        pos_ += kXerialHeaderBytes;
        continue;
      }
      if (rest.size() < kXerialLengthBytes) {
        return absl::DataLossError("snappy: truncated xerial block length");
      }
      const uint32_t length = load_be32(rest.data());
      if (length > rest.size() - kXerialLengthBytes) {
        return absl::DataLossError(fmt::format(
            "snappy: xerial block of {} bytes overruns the input ({} bytes left)", length,
            rest.size() - kXerialLengthBytes));
      }
      pos_ += kXerialLengthBytes + length;
      return rest.subspan(kXerialLengthBytes, length);
    }
  }

 private:
  std::span<const std::byte> input_;
  size_t pos_ = 0;
};

absl::StatusOr<size_t> raw_length(std::span<const std::byte> block) {
  size_t length = 0;
  if (!snappy::GetUncompressedLength(as_chars(block.data()), block.size(), &length)) {
    return absl::DataLossError("snappy: corrupt block header (uncompressed length)");
  }
  return length;
}

absl::Status raw_uncompress_into(std::span<const std::byte> block, size_t length,
                                 BoundedOutput& out) {
  RETURN_IF_ERROR(out.reserve(length));
  // An empty block still gets validated; it needs a valid (unused) target.
  char unused = 0;
  char* target = length == 0 ? &unused : reinterpret_cast<char*>(out.tail());
  if (!snappy::RawUncompress(as_chars(block.data()), block.size(), target)) {
    return absl::DataLossError("snappy: corrupt block");
  }
  out.commit(length);
  return absl::OkStatus();
}

absl::StatusOr<io::Buffer> xerial_decompress(std::span<const std::byte> input,
                                             size_t max_output) {
  // Pass 1: validate the framing and the total size before allocating.
  size_t total = 0;
  XerialReader sizes(input);
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<std::span<const std::byte>> block, sizes.next());
    if (!block) break;
    ASSIGN_OR_RETURN(size_t length, raw_length(*block));
    if (length > max_output - total) {
      return BoundedOutput("snappy", max_output, 0).exceeded();
    }
    total += length;
  }
  // Pass 2: decompress each block in place.
  BoundedOutput out("snappy", max_output, total);
  XerialReader blocks(input);
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<std::span<const std::byte>> block, blocks.next());
    if (!block) break;
    ASSIGN_OR_RETURN(size_t length, raw_length(*block));
    RETURN_IF_ERROR(raw_uncompress_into(*block, length, out));
  }
  return std::move(out).finish();
}

}  // namespace

absl::StatusOr<io::Buffer> snappy_compress(std::span<const std::byte> input) {
  const size_t blocks = (input.size() + kXerialBlockInputBytes - 1) / kXerialBlockInputBytes;
  const size_t block_bound =
      kXerialLengthBytes + snappy::MaxCompressedLength(kXerialBlockInputBytes);
  const size_t bound = kXerialHeaderBytes + blocks * block_bound;
  io::Buffer out = io::Buffer::allocate(bound);
  std::byte* p = out.mutable_data();
  std::memcpy(p, kXerialMagic.data(), kXerialMagic.size());
  store_be32(kXerialVersion, p + 8);
  store_be32(kXerialCompatibleVersion, p + 12);
  size_t written = kXerialHeaderBytes;
  for (size_t offset = 0; offset < input.size(); offset += kXerialBlockInputBytes) {
    const size_t n = std::min(kXerialBlockInputBytes, input.size() - offset);
    size_t compressed = 0;
    snappy::RawCompress(as_chars(input.data() + offset), n,
                        reinterpret_cast<char*>(p + written + kXerialLengthBytes), &compressed);
    store_be32(static_cast<uint32_t>(compressed), p + written);
    written += kXerialLengthBytes + compressed;
  }
  return fit(std::move(out), written);
}

absl::StatusOr<io::Buffer> snappy_decompress(std::span<const std::byte> input,
                                             size_t max_output) {
  if (input.empty()) return absl::DataLossError("snappy: empty input");
  if (starts_with_magic(input)) return xerial_decompress(input, max_output);
  ASSIGN_OR_RETURN(size_t length, raw_length(input));
  BoundedOutput out("snappy", max_output, length <= max_output ? length : 0);
  RETURN_IF_ERROR(raw_uncompress_into(input, length, out));
  return std::move(out).finish();
}

}  // namespace brook::codec::internal
