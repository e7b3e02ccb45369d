// net/codec/codec_impl.h
//
// Internal to brook_codec: the per-codec entry points behind compress() and
// decompress(), and BoundedOutput, the growing output buffer every
// decompressor writes into. Not for use outside net/codec/.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"

namespace brook::codec::internal {

// Each compressor maps kCompressionLevelDefault to its codec's default and
// returns InvalidArgument for a level outside its codec's range.
absl::StatusOr<io::Buffer> gzip_compress(std::span<const std::byte> input, int level);
absl::StatusOr<io::Buffer> gzip_decompress(std::span<const std::byte> input, size_t max_output);
absl::StatusOr<io::Buffer> snappy_compress(std::span<const std::byte> input);
absl::StatusOr<io::Buffer> snappy_decompress(std::span<const std::byte> input, size_t max_output);
absl::StatusOr<io::Buffer> lz4_compress(std::span<const std::byte> input, int level);
absl::StatusOr<io::Buffer> lz4_decompress(std::span<const std::byte> input, size_t max_output);
absl::StatusOr<io::Buffer> zstd_compress(std::span<const std::byte> input, int level);
absl::StatusOr<io::Buffer> zstd_decompress(std::span<const std::byte> input, size_t max_output);

// The first `used` bytes of `buffer`, copied into an exact allocation when
// keeping the whole buffer alive would waste much memory.
// REQUIRES: used <= buffer.size().
io::Buffer fit(io::Buffer buffer, size_t used);

// Decompressed bytes accumulated in one io::Buffer that grows (doubling) as
// a decoder fills it, never past max_output + 1 bytes: room for one byte too
// many is what lets a streaming decoder prove an overrun without a second
// call. Not thread-safe; one per decompress() call.
class BoundedOutput {
 public:
  // `codec` names the codec in errors and must outlive this object.
  // `size_hint` is the expected output size, from a header or a guess; it is
  // untrusted and only sizes the first allocation, clamped to the cap.
  BoundedOutput(std::string_view codec, size_t max_output, size_t size_hint);

  std::byte* tail() { return buffer_.mutable_data() + size_; }
  size_t available() const { return buffer_.size() - size_; }
  size_t size() const { return size_; }
  // Records that the decoder wrote n bytes at tail(). REQUIRES: n <= available().
  void commit(size_t n);

  // Makes available() >= 1, or ResourceExhausted when the output is already
  // past max_output.
  absl::Status make_room();
  // Makes available() >= n, or ResourceExhausted when size() + n > max_output.
  absl::Status reserve(size_t n);
  // The output; ResourceExhausted when it is longer than max_output.
  absl::StatusOr<io::Buffer> finish() &&;

  absl::Status exceeded() const;

 private:
  void grow_to(size_t capacity);

  std::string_view codec_;
  size_t max_output_;
  size_t capacity_max_;  // max_output_ + 1, saturated
  size_t size_hint_;
  io::Buffer buffer_;
  size_t size_ = 0;
};

}  // namespace brook::codec::internal
