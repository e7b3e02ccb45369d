// net/codec/compression.cc
//
// Dispatch from Compression to the codec files (compression_<codec>.cc), and
// the output buffer they share.
#include "net/codec/compression.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "io/assert.h"
#include "net/codec/codec_impl.h"

namespace brook::codec {

absl::StatusOr<Compression> compression_from_attributes(int16_t attributes) {
  const int id = attributes & kCompressionAttributeMask;
  if (id > static_cast<int>(Compression::kZstd)) {
    return absl::InvalidArgumentError(fmt::format("unknown compression codec id {}", id));
  }
  return static_cast<Compression>(id);
}

std::string_view compression_name(Compression compression) {
  switch (compression) {
    case Compression::kNone: return "none";
    case Compression::kGzip: return "gzip";
    case Compression::kSnappy: return "snappy";
    case Compression::kLz4: return "lz4";
    case Compression::kZstd: return "zstd";
  }
  return "unknown";
}

namespace {

absl::Status unknown_codec(Compression compression) {
  return absl::InvalidArgumentError(
      fmt::format("unknown compression codec id {}", static_cast<int>(compression)));
}

}  // namespace

absl::StatusOr<io::Buffer> compress(Compression compression, std::span<const std::byte> input,
                                    int level) {
  switch (compression) {
    case Compression::kNone: return io::Buffer::copy_of(input);
    case Compression::kGzip: return internal::gzip_compress(input, level);
    case Compression::kSnappy: return internal::snappy_compress(input);
    case Compression::kLz4: return internal::lz4_compress(input, level);
    case Compression::kZstd: return internal::zstd_compress(input, level);
  }
  return unknown_codec(compression);
}

absl::StatusOr<io::Buffer> decompress(Compression compression, std::span<const std::byte> input,
                                      size_t max_output) {
  switch (compression) {
    case Compression::kNone:
      if (input.size() > max_output) {
        return absl::ResourceExhaustedError(
            fmt::format("none: {} bytes exceed max_output ({} bytes)", input.size(), max_output));
      }
      return io::Buffer::copy_of(input);
    case Compression::kGzip: return internal::gzip_decompress(input, max_output);
    case Compression::kSnappy: return internal::snappy_decompress(input, max_output);
    case Compression::kLz4: return internal::lz4_decompress(input, max_output);
    case Compression::kZstd: return internal::zstd_decompress(input, max_output);
  }
  return unknown_codec(compression);
}

// ---------------------------------------------------------------------------
// Output buffers.

namespace internal {
namespace {

// Growth never goes in steps smaller than this, so high-ratio data does not
// copy its output many times while it is small.
constexpr size_t kGrowthBytesMin = 4096;
// fit() copies when the unused tail is larger than this many bytes and
// larger than 1/kWasteDivisor of the used part.
constexpr size_t kWasteBytesMin = 4096;
constexpr size_t kWasteDivisor = 4;

size_t saturating_add(size_t a, size_t b) {
  return a > std::numeric_limits<size_t>::max() - b ? std::numeric_limits<size_t>::max() : a + b;
}

}  // namespace

io::Buffer fit(io::Buffer buffer, size_t used) {
  BROOK_ASSERT_LE(used, buffer.size());
  if (used == 0) return io::Buffer();
  const size_t waste = buffer.size() - used;
  if (waste > kWasteBytesMin && waste > used / kWasteDivisor) {
    return io::Buffer::copy_of(buffer.span().first(used));
  }
  return buffer.slice(0, used);
}

BoundedOutput::BoundedOutput(std::string_view codec, size_t max_output, size_t size_hint)
    : codec_(codec),
      max_output_(max_output),
      capacity_max_(saturating_add(max_output, 1)),
      size_hint_(size_hint) {}

void BoundedOutput::commit(size_t n) {
  BROOK_ASSERT_LE(n, available());
  size_ += n;
}

absl::Status BoundedOutput::exceeded() const {
  return absl::ResourceExhaustedError(
      fmt::format("{}: decompressed data exceeds max_output ({} bytes)", codec_, max_output_));
}

absl::Status BoundedOutput::make_room() {
  if (available() > 0) return absl::OkStatus();
  const size_t capacity = buffer_.size();
  if (capacity >= capacity_max_) return exceeded();
  size_t target;
  if (capacity == 0) {
    // One byte past the hint: a decoder that fills an exact-sized buffer
    // may need one more call to see the end of its stream.
    target = std::max(saturating_add(size_hint_, 1), size_t{64});
  } else {
    target = std::max(saturating_add(capacity, capacity), saturating_add(capacity, kGrowthBytesMin));
  }
  grow_to(std::min(target, capacity_max_));
  return absl::OkStatus();
}

absl::Status BoundedOutput::reserve(size_t n) {
  if (size_ > max_output_ || n > max_output_ - size_) return exceeded();
  if (available() >= n) return absl::OkStatus();
  const size_t capacity = buffer_.size();
  size_t target = std::max(size_ + n, saturating_add(capacity, capacity));
  if (capacity == 0) target = std::max(size_ + n, size_hint_);
  grow_to(std::min(target, capacity_max_));
  return absl::OkStatus();
}

absl::StatusOr<io::Buffer> BoundedOutput::finish() && {
  if (size_ > max_output_) return exceeded();
  return fit(std::move(buffer_), size_);
}

void BoundedOutput::grow_to(size_t capacity) {
  BROOK_ASSERT_GT(capacity, buffer_.size());
  BROOK_ASSERT_LE(capacity, capacity_max_);
  io::Buffer grown = io::Buffer::allocate(capacity);
  if (size_ > 0) std::memcpy(grown.mutable_data(), buffer_.data(), size_);
  buffer_ = std::move(grown);
}

}  // namespace internal
}  // namespace brook::codec
