// net/codec/compression_zstd.cc
//
// zstd frames through libzstd. compress() writes one frame with the content
// size in its header (the one-shot API); Kafka's Java client writes frames
// through zstd-jni's streaming API, which leaves the size out, so
// decompression streams: it needs no size up front, takes frames back to back
// and skips skippable frames.
//
// The streaming decoder keeps a window buffer as large as the frame's window,
// which a header declares; the window limit keeps that bounded (see
// window_log_max).
#include <zstd.h>

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "io/status.h"
#include "net/codec/codec_impl.h"
#include "net/codec/compression.h"

namespace brook::codec::internal {
namespace {

constexpr int kLevelDefault = 3;  // ZSTD_CLEVEL_DEFAULT; Kafka's default too
// zstd-jni's (and libzstd's) default decoder limit, ZSTD_WINDOWLOG_LIMIT_DEFAULT.
constexpr int kWindowLogLimit = 27;
// Windows up to 8 MiB are always accepted: zstd's levels up to 19 use no more.
constexpr int kWindowLogFloor = 23;
constexpr size_t kGuessRatio = 4;

// The largest window accepted: enough for any frame whose output fits the
// cap, at least 8 MiB, never beyond what Kafka's decoder accepts.
int window_log_max(size_t max_output) {
  const int needed = max_output <= 1 ? 0 : static_cast<int>(std::bit_width(max_output - 1));
  return std::clamp(needed, kWindowLogFloor, kWindowLogLimit);
}

class DecompressionContext {
 public:
  DecompressionContext() : dctx_(ZSTD_createDCtx()) {}
  DecompressionContext(const DecompressionContext&) = delete;
  DecompressionContext& operator=(const DecompressionContext&) = delete;
  ~DecompressionContext() { ZSTD_freeDCtx(dctx_); }
  ZSTD_DCtx* get() { return dctx_; }

 private:
  ZSTD_DCtx* dctx_;
};

absl::Status zstd_error(size_t code) {
  return absl::DataLossError(fmt::format("zstd: {}", ZSTD_getErrorName(code)));
}

}  // namespace

absl::StatusOr<io::Buffer> zstd_compress(std::span<const std::byte> input, int level) {
  if (level == kCompressionLevelDefault) level = kLevelDefault;
  if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) {
    return absl::InvalidArgumentError(fmt::format("zstd: level {} outside {}..{}", level,
                                                  ZSTD_minCLevel(), ZSTD_maxCLevel()));
  }
  const size_t bound = ZSTD_compressBound(input.size());
  io::Buffer out = io::Buffer::allocate(bound);
  const size_t written = ZSTD_compress(out.mutable_data(), bound, input.data(), input.size(), level);
  if (ZSTD_isError(written)) {
    return absl::InternalError(fmt::format("zstd: {}", ZSTD_getErrorName(written)));
  }
  return fit(std::move(out), written);
}

absl::StatusOr<io::Buffer> zstd_decompress(std::span<const std::byte> input, size_t max_output) {
  if (input.empty()) return absl::DataLossError("zstd: empty input");
  size_t hint = input.size() * kGuessRatio;
  const unsigned long long declared = ZSTD_getFrameContentSize(input.data(), input.size());
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR) {
    BoundedOutput probe("zstd", max_output, 0);
    if (declared > max_output) return probe.exceeded();
    hint = static_cast<size_t>(declared);
  }
  DecompressionContext dctx;
  if (dctx.get() == nullptr) return absl::InternalError("zstd: cannot create a decompression context");
  const size_t set =
      ZSTD_DCtx_setParameter(dctx.get(), ZSTD_d_windowLogMax, window_log_max(max_output));
  if (ZSTD_isError(set)) return absl::InternalError(fmt::format("zstd: {}", ZSTD_getErrorName(set)));

  BoundedOutput out("zstd", max_output, hint);
  ZSTD_inBuffer src{input.data(), input.size(), 0};
  size_t next = 1;  // 0 once the frame being decoded is complete and flushed
  while (src.pos < src.size || next != 0) {
    RETURN_IF_ERROR(out.make_room());
    ZSTD_outBuffer dst{out.tail(), out.available(), 0};
    const size_t taken_before = src.pos;
    next = ZSTD_decompressStream(dctx.get(), &dst, &src);
    if (ZSTD_isError(next)) return zstd_error(next);
    out.commit(dst.pos);
    const bool had_room = out.available() > 0;
    if (next != 0 && src.pos == src.size && had_room) {
      return absl::DataLossError("zstd: truncated frame");
    }
    if (src.pos == taken_before && dst.pos == 0 && had_room) {
      return absl::DataLossError("zstd: decoder made no progress");
    }
  }
  return std::move(out).finish();
}

}  // namespace brook::codec::internal
