// net/codec/compression_lz4.cc
//
// LZ4 frames through liblz4's LZ4F API. Kafka's KafkaLZ4BlockOutputStream
// (magic v2) writes a standard frame: independent 64 KiB blocks, no block or
// content checksum, no content size; Kafka's reader insists on independent
// blocks, so compress() writes exactly that. Decompression takes any
// standard frame (content size, checksums, linked blocks, skippable frames)
// and any number of frames in a row; liblz4 verifies the checksums and the
// content size when a frame carries them.
#include <lz4frame.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "io/status.h"
#include "net/codec/codec_impl.h"
#include "net/codec/compression.h"

namespace brook::codec::internal {
namespace {

constexpr int kLevelMin = 0;
constexpr int kLevelMax = 17;  // Kafka's compression.lz4.level range ends here
constexpr uint32_t kFrameMagic = 0x184D2204;
constexpr size_t kFrameDescriptorOffset = 4;
constexpr size_t kContentSizeOffset = 6;
constexpr uint8_t kFlagContentSize = 0x08;
constexpr size_t kGuessRatio = 4;

uint64_t load_le(const std::byte* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// The first frame's content size when its header declares one.
std::optional<uint64_t> declared_content_size(std::span<const std::byte> input) {
  if (input.size() < kContentSizeOffset + 8) return std::nullopt;
  if (load_le(input.data(), 4) != kFrameMagic) return std::nullopt;
  const auto flags = static_cast<uint8_t>(input[kFrameDescriptorOffset]);
  if ((flags & kFlagContentSize) == 0) return std::nullopt;
  return load_le(input.data() + kContentSizeOffset, 8);
}

absl::Status lz4_error(size_t code) {
  return absl::DataLossError(fmt::format("lz4: {}", LZ4F_getErrorName(code)));
}

class DecompressionContext {
 public:
  DecompressionContext() { code_ = LZ4F_createDecompressionContext(&dctx_, LZ4F_VERSION); }
  DecompressionContext(const DecompressionContext&) = delete;
  DecompressionContext& operator=(const DecompressionContext&) = delete;
  ~DecompressionContext() {
    // Freeing reports only whether a frame was left unfinished.
    if (dctx_ != nullptr) (void)LZ4F_freeDecompressionContext(dctx_);
  }
  bool ok() const { return !LZ4F_isError(code_) && dctx_ != nullptr; }
  LZ4F_dctx* get() { return dctx_; }

 private:
  LZ4F_dctx* dctx_ = nullptr;
  size_t code_ = 0;
};

}  // namespace

absl::StatusOr<io::Buffer> lz4_compress(std::span<const std::byte> input, int level) {
  if (level == kCompressionLevelDefault) level = 0;
  if (level < kLevelMin || level > kLevelMax) {
    return absl::InvalidArgumentError(
        fmt::format("lz4: level {} outside {}..{}", level, kLevelMin, kLevelMax));
  }
  LZ4F_preferences_t prefs;
  std::memset(&prefs, 0, sizeof prefs);
  prefs.frameInfo.blockSizeID = LZ4F_max64KB;
  prefs.frameInfo.blockMode = LZ4F_blockIndependent;
  prefs.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
  prefs.frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum;
  prefs.compressionLevel = level;
  const size_t bound = LZ4F_compressFrameBound(input.size(), &prefs);
  io::Buffer out = io::Buffer::allocate(bound);
  const size_t written =
      LZ4F_compressFrame(out.mutable_data(), bound, input.data(), input.size(), &prefs);
  if (LZ4F_isError(written)) {
    return absl::InternalError(fmt::format("lz4: {}", LZ4F_getErrorName(written)));
  }
  return fit(std::move(out), written);
}

absl::StatusOr<io::Buffer> lz4_decompress(std::span<const std::byte> input, size_t max_output) {
  if (input.empty()) return absl::DataLossError("lz4: empty input");
  size_t hint = input.size() * kGuessRatio;
  if (const std::optional<uint64_t> declared = declared_content_size(input)) {
    BoundedOutput probe("lz4", max_output, 0);
    if (*declared > max_output) return probe.exceeded();
    hint = static_cast<size_t>(*declared);
  }
  DecompressionContext dctx;
  if (!dctx.ok()) return absl::InternalError("lz4: cannot create a decompression context");

  BoundedOutput out("lz4", max_output, hint);
  size_t consumed = 0;
  size_t next = 1;  // 0 once the frame being decoded is complete
  while (consumed < input.size() || next != 0) {
    RETURN_IF_ERROR(out.make_room());
    size_t produced = out.available();
    size_t taken = input.size() - consumed;
    next = LZ4F_decompress(dctx.get(), out.tail(), &produced, input.data() + consumed, &taken,
                           nullptr);
    if (LZ4F_isError(next)) return lz4_error(next);
    out.commit(produced);
    consumed += taken;
    const bool had_room = out.available() > 0;
    if (next != 0 && consumed == input.size() && had_room) {
      return absl::DataLossError("lz4: truncated frame");
    }
    if (taken == 0 && produced == 0 && had_room) {
      return absl::DataLossError("lz4: decoder made no progress");
    }
  }
  return std::move(out).finish();
}

}  // namespace brook::codec::internal
