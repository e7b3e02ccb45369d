// net/codec/compression_gzip.cc
//
// gzip through zlib (windowBits 15 + 16: a 32 KiB window inside the gzip
// wrapper, whose CRC-32 and length trailer zlib checks). Kafka's Java client
// writes one member with GZIPOutputStream and reads with GZIPInputStream,
// which also reads members written back to back; so does this.
#define ZLIB_CONST
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "io/status.h"
#include "net/codec/codec_impl.h"
#include "net/codec/compression.h"

namespace brook::codec::internal {
namespace {

constexpr int kGzipWindowBits = 15 + 16;
constexpr int kMemLevel = 8;  // zlib's default
constexpr int kLevelMin = -1;  // Z_DEFAULT_COMPRESSION
constexpr int kLevelMax = 9;
// zlib counts bytes in uInt; no single call is given more than this.
constexpr size_t kZlibChunkBytes = size_t{1} << 30;
// Deflate expands by at most 1032:1 (a 258-byte match in a 2-bit code,
// roughly), so a trailer claiming more than that for one member is a lie.
constexpr size_t kDeflateRatioMax = 1032;
constexpr size_t kGzipMemberBytesMin = 18;  // 10-byte header + empty block + 8-byte trailer
// Without a usable size, guess this ratio for the first allocation.
constexpr size_t kGuessRatio = 4;

// Owns one zlib stream.
class ZStream {
 public:
  enum class Kind : uint8_t { kDeflate, kInflate };
  explicit ZStream(Kind kind) : kind_(kind) {}
  ZStream(const ZStream&) = delete;
  ZStream& operator=(const ZStream&) = delete;
  ~ZStream() {
    if (!initialised_) return;
    // Errors from the *End calls only report discarded pending data.
    if (kind_ == Kind::kDeflate) {
      (void)deflateEnd(&zs);
    } else {
      (void)inflateEnd(&zs);
    }
  }
  void set_initialised() { initialised_ = true; }

  z_stream zs{};

 private:
  Kind kind_;
  bool initialised_ = false;
};

absl::Status zlib_error(std::string_view what, int rc, const z_stream& zs) {
  const char* reason = zs.msg != nullptr ? zs.msg : zError(rc);
  return absl::DataLossError(fmt::format("gzip: {}: {} (zlib code {})", what, reason, rc));
}

// The first allocation: ISIZE from the trailer when it is plausible for a
// single member and within the cap (an untrusted header never sizes more).
size_t gzip_size_hint(std::span<const std::byte> input, size_t max_output) {
  const size_t guess = input.size() * kGuessRatio;
  if (input.size() < kGzipMemberBytesMin) return guess;
  uint32_t isize = 0;
  std::memcpy(&isize, input.data() + input.size() - 4, 4);
  if constexpr (std::endian::native == std::endian::big) isize = __builtin_bswap32(isize);
  if (isize > max_output || isize / kDeflateRatioMax > input.size()) return guess;
  return isize;
}

}  // namespace

absl::StatusOr<io::Buffer> gzip_compress(std::span<const std::byte> input, int level) {
  if (level == kCompressionLevelDefault) level = Z_DEFAULT_COMPRESSION;
  if (level < kLevelMin || level > kLevelMax) {
    return absl::InvalidArgumentError(
        fmt::format("gzip: level {} outside {}..{}", level, kLevelMin, kLevelMax));
  }
  ZStream d(ZStream::Kind::kDeflate);
  const int init =
      deflateInit2(&d.zs, level, Z_DEFLATED, kGzipWindowBits, kMemLevel, Z_DEFAULT_STRATEGY);
  if (init != Z_OK) return absl::InternalError(fmt::format("gzip: deflateInit2 failed ({})", init));
  d.set_initialised();

  const size_t bound = deflateBound(&d.zs, input.size());
  io::Buffer out = io::Buffer::allocate(bound);
  size_t consumed = 0;
  size_t written = 0;
  for (;;) {
    if (d.zs.avail_in == 0 && consumed < input.size()) {
      const size_t n = std::min(kZlibChunkBytes, input.size() - consumed);
      d.zs.next_in = reinterpret_cast<const Bytef*>(input.data() + consumed);
      d.zs.avail_in = static_cast<uInt>(n);
      consumed += n;
    }
    d.zs.next_out = reinterpret_cast<Bytef*>(out.mutable_data() + written);
    d.zs.avail_out = static_cast<uInt>(std::min(kZlibChunkBytes, bound - written));
    const uInt out_before = d.zs.avail_out;
    const uInt in_before = d.zs.avail_in;
    const int rc = deflate(&d.zs, consumed == input.size() ? Z_FINISH : Z_NO_FLUSH);
    written += out_before - d.zs.avail_out;
    if (rc == Z_STREAM_END) break;
    const bool progressed = out_before != d.zs.avail_out || in_before != d.zs.avail_in;
    if ((rc != Z_OK && rc != Z_BUF_ERROR) || !progressed) {
      return absl::InternalError(fmt::format("gzip: deflate failed ({})", rc));
    }
  }
  return fit(std::move(out), written);
}

absl::StatusOr<io::Buffer> gzip_decompress(std::span<const std::byte> input, size_t max_output) {
  if (input.empty()) return absl::DataLossError("gzip: empty input");
  ZStream z(ZStream::Kind::kInflate);
  const int init = inflateInit2(&z.zs, kGzipWindowBits);
  if (init != Z_OK) return absl::InternalError(fmt::format("gzip: inflateInit2 failed ({})", init));
  z.set_initialised();

  BoundedOutput out("gzip", max_output, gzip_size_hint(input, max_output));
  size_t consumed = 0;
  for (;;) {
    if (z.zs.avail_in == 0 && consumed < input.size()) {
      const size_t n = std::min(kZlibChunkBytes, input.size() - consumed);
      z.zs.next_in = reinterpret_cast<const Bytef*>(input.data() + consumed);
      z.zs.avail_in = static_cast<uInt>(n);
      consumed += n;
    }
    const bool input_done = z.zs.avail_in == 0 && consumed == input.size();
    RETURN_IF_ERROR(out.make_room());
    z.zs.next_out = reinterpret_cast<Bytef*>(out.tail());
    z.zs.avail_out = static_cast<uInt>(std::min(kZlibChunkBytes, out.available()));
    const uInt out_before = z.zs.avail_out;
    const int rc = inflate(&z.zs, Z_NO_FLUSH);
    out.commit(out_before - z.zs.avail_out);
    if (rc == Z_STREAM_END) {
      if (z.zs.avail_in == 0 && consumed == input.size()) break;
      // Another member follows: start it with fresh header state.
      if (inflateReset(&z.zs) != Z_OK) return zlib_error("inflateReset", rc, z.zs);
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && !input_done) continue;  // out of output room: grow
    if (rc == Z_BUF_ERROR) return absl::DataLossError("gzip: truncated input");
    return zlib_error("corrupt input", rc, z.zs);
  }
  return std::move(out).finish();
}

}  // namespace brook::codec::internal
