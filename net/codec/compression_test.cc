// net/codec/compression_test.cc
//
// Every codec round-trips any input; reads what each compression library
// writes through its own simple API (the shapes Kafka clients send); writes
// the framing Kafka expects; rejects garbage and truncation with an error; and
// never allocates output beyond max_output, however far a stream would expand.
#include "net/codec/compression.h"

#define ZLIB_CONST
#include <lz4frame.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "absl/strings/match.h"

// io::Buffer allocates with aligned operator new; recording the largest such
// request shows how much output a decompression tried to hold.
namespace {
std::atomic<size_t> g_aligned_bytes_max{0};

void* aligned_new(std::size_t n, std::align_val_t alignment) {
  size_t seen = g_aligned_bytes_max.load(std::memory_order_relaxed);
  while (n > seen && !g_aligned_bytes_max.compare_exchange_weak(seen, n)) {
  }
  const auto a = static_cast<size_t>(alignment);
  void* p = std::aligned_alloc(a, (n + a - 1) / a * a);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n, std::align_val_t a) { return aligned_new(n, a); }
void* operator new[](std::size_t n, std::align_val_t a) { return aligned_new(n, a); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace brook::codec {
namespace {

using Bytes = std::vector<std::byte>;

constexpr Compression kCodecs[] = {Compression::kGzip, Compression::kSnappy, Compression::kLz4,
                                   Compression::kZstd};
constexpr size_t kMiB = 1024 * 1024;

std::span<const std::byte> span_of(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

Bytes to_bytes(std::span<const std::byte> s) { return Bytes(s.begin(), s.end()); }
Bytes to_bytes(const io::Buffer& b) { return to_bytes(b.span()); }
Bytes to_bytes(const std::string& s) { return to_bytes(span_of(s)); }

Bytes concat(const Bytes& a, const Bytes& b) {
  Bytes out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

uint64_t next_random(uint64_t& state) {  // splitmix64
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Bytes random_bytes(size_t n, uint64_t seed) {
  Bytes out(n);
  for (auto& b : out) b = static_cast<std::byte>(next_random(seed));
  return out;
}

// Record-like text: compresses 3-6x, like typical Kafka payloads.
Bytes text_bytes(size_t n, uint64_t seed) {
  static const char* const kWords[] = {"user", "click", "view", "order", "cart", "session",
                                       "page", "error", "ok", "region", "eu-west", "us-east"};
  std::string s;
  while (s.size() < n) {
    const uint64_t r = next_random(seed);
    s += "{\"event\":\"";
    s += kWords[r % 12];
    s += "\",\"id\":" + std::to_string(r % 100000) + ",\"tag\":\"" + kWords[(r >> 20) % 12] +
         "\"}\n";
  }
  s.resize(n);
  return to_bytes(s);
}

absl::StatusOr<Bytes> round_trip(Compression c, const Bytes& in, size_t max_output, int level) {
  auto compressed = compress(c, in, level);
  if (!compressed.ok()) return compressed.status();
  auto out = decompress(c, compressed->span(), max_output);
  if (!out.ok()) return out.status();
  return to_bytes(*out);
}

// --- Round trips ------------------------------------------------------------

RC_GTEST_PROP(Compression, RoundTripsAnyInput, (uint64_t seed, bool text)) {
  const size_t n = *rc::gen::inRange<size_t>(0, 200 * 1024);
  const Bytes in = text ? text_bytes(n, seed) : random_bytes(n, seed);
  for (Compression c : kCodecs) {
    auto compressed = compress(c, in);
    RC_ASSERT(compressed.ok());
    auto exact = decompress(c, compressed->span(), n);
    RC_ASSERT(exact.ok());
    RC_ASSERT(to_bytes(*exact) == in);
    if (n > 0) {
      // One byte less than the output is an overrun, never a short result.
      auto capped = decompress(c, compressed->span(), n - 1);
      RC_ASSERT(capped.status().code() == absl::StatusCode::kResourceExhausted);
    }
  }
}

RC_GTEST_PROP(Compression, RoundTripsAtEveryLevel, (uint64_t seed)) {
  const Bytes in = text_bytes(*rc::gen::inRange<size_t>(0, 100 * 1024), seed);
  const int gzip_level = *rc::gen::inRange(-1, 10);
  const int lz4_level = *rc::gen::inRange(0, 18);
  const int zstd_level = *rc::gen::inRange(-5, 20);
  for (auto [c, level] : {std::pair{Compression::kGzip, gzip_level},
                          std::pair{Compression::kLz4, lz4_level},
                          std::pair{Compression::kZstd, zstd_level}}) {
    auto out = round_trip(c, in, in.size(), level);
    RC_ASSERT(out.ok());
    RC_ASSERT(*out == in);
  }
}

TEST(Compression, EmptyInputRoundTrips) {
  for (Compression c : kCodecs) {
    auto compressed = compress(c, {});
    ASSERT_TRUE(compressed.ok()) << compression_name(c);
    EXPECT_FALSE(compressed->empty()) << compression_name(c);
    auto out = decompress(c, compressed->span(), 0);
    ASSERT_TRUE(out.ok()) << compression_name(c) << ": " << out.status();
    EXPECT_TRUE(out->empty());
  }
}

TEST(Compression, NonePassesBytesThrough) {
  const Bytes in = text_bytes(1000, 1);
  auto c = compress(Compression::kNone, in);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(to_bytes(*c), in);
  auto d = decompress(Compression::kNone, in, 1000);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(to_bytes(*d), in);
  EXPECT_EQ(decompress(Compression::kNone, in, 999).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(Compression, CompressesRecordLikeData) {
  const Bytes in = text_bytes(kMiB, 3);
  for (Compression c : kCodecs) {
    auto compressed = compress(c, in);
    ASSERT_TRUE(compressed.ok());
    EXPECT_LT(compressed->size(), in.size() / 2) << compression_name(c);
  }
}

// --- Reading what the libraries write -----------------------------------------

Bytes zlib_gzip(const Bytes& in, int level, bool with_name) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
  gz_header header{};
  std::string name = "records.bin";
  if (with_name) {
    header.name = reinterpret_cast<Bytef*>(name.data());
    header.time = 1700000000;
    EXPECT_EQ(deflateSetHeader(&zs, &header), Z_OK);
  }
  Bytes out(deflateBound(&zs, in.size()) + 64);
  zs.next_in = reinterpret_cast<const Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST(CompressionGzip, ReadsZlibGzipStreamsAndConcatenatedMembers) {
  const Bytes a = text_bytes(100000, 4);
  const Bytes b = random_bytes(5000, 5);
  for (int level : {1, 6, 9}) {
    auto out = decompress(Compression::kGzip, zlib_gzip(a, level, level == 9), kMiB);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(to_bytes(*out), a);
  }
  const Bytes members = concat(zlib_gzip(a, 6, false), zlib_gzip(b, 1, true));
  auto out = decompress(Compression::kGzip, members, kMiB);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(to_bytes(*out), concat(a, b));
  // Our own output is a plain gzip member that zlib reads.
  auto ours = compress(Compression::kGzip, a);
  ASSERT_TRUE(ours.ok());
  EXPECT_EQ(static_cast<uint8_t>(ours->span()[0]), 0x1f);
  EXPECT_EQ(static_cast<uint8_t>(ours->span()[1]), 0x8b);
  z_stream zs{};
  ASSERT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  Bytes back(a.size() + 1);
  zs.next_in = reinterpret_cast<const Bytef*>(ours->data());
  zs.avail_in = static_cast<uInt>(ours->size());
  zs.next_out = reinterpret_cast<Bytef*>(back.data());
  zs.avail_out = static_cast<uInt>(back.size());
  EXPECT_EQ(inflate(&zs, Z_FINISH), Z_STREAM_END);
  back.resize(zs.total_out);
  inflateEnd(&zs);
  EXPECT_EQ(back, a);
}

TEST(CompressionGzip, RejectsTrailingGarbageAndBadChecksums) {
  const Bytes a = text_bytes(10000, 6);
  Bytes garbage = zlib_gzip(a, 6, false);
  const Bytes good = garbage;
  garbage.push_back(std::byte{0x42});
  EXPECT_EQ(decompress(Compression::kGzip, garbage, kMiB).status().code(),
            absl::StatusCode::kDataLoss);
  Bytes bad_crc = good;
  bad_crc[bad_crc.size() - 6] ^= std::byte{0x01};  // inside the CRC-32 trailer field
  const auto status = decompress(Compression::kGzip, bad_crc, kMiB).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(status.message()).find("gzip"), std::string::npos) << status;
}

// snappy-java's framing of "hello", written out by hand from the format.
TEST(CompressionSnappy, ReadsAHandWrittenXerialStream) {
  const Bytes framed = to_bytes(std::string(
      "\x82SNAPPY\x00"
      "\x00\x00\x00\x01\x00\x00\x00\x01"
      "\x00\x00\x00\x07"
      "\x05\x10hello",
      27));
  auto out = decompress(Compression::kSnappy, framed, 100);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->view(), "hello");
  // The same block unframed is raw snappy, as librdkafka may send.
  auto raw = decompress(Compression::kSnappy, std::span(framed).subspan(20), 100);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->view(), "hello");
}

TEST(CompressionSnappy, WritesXerialFramingIn32KiBBlocks) {
  const Bytes in = text_bytes(100 * 1024 + 17, 7);
  auto out = compress(Compression::kSnappy, in);
  ASSERT_TRUE(out.ok());
  const Bytes framed = to_bytes(*out);
  const Bytes header = to_bytes(std::string("\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01", 16));
  ASSERT_GE(framed.size(), 16u);
  EXPECT_EQ(Bytes(framed.begin(), framed.begin() + 16), header);
  size_t pos = 16;
  std::string joined;
  int blocks = 0;
  while (pos < framed.size()) {
    ASSERT_LE(pos + 4, framed.size());
    const uint32_t length = (uint32_t(framed[pos]) << 24) | (uint32_t(framed[pos + 1]) << 16) |
                            (uint32_t(framed[pos + 2]) << 8) | uint32_t(framed[pos + 3]);
    pos += 4;
    ASSERT_LE(pos + length, framed.size());
    std::string block;
    ASSERT_TRUE(snappy::Uncompress(reinterpret_cast<const char*>(framed.data() + pos), length,
                                   &block));
    EXPECT_LE(block.size(), 32u * 1024);
    joined += block;
    pos += length;
    ++blocks;
  }
  EXPECT_EQ(blocks, 4);
  EXPECT_EQ(to_bytes(joined), in);
}

TEST(CompressionSnappy, ReadsRawSnappyAndConcatenatedStreams) {
  const Bytes a = text_bytes(70000, 8);
  const Bytes b = random_bytes(40000, 9);
  std::string raw;
  snappy::Compress(reinterpret_cast<const char*>(a.data()), a.size(), &raw);
  auto out = decompress(Compression::kSnappy, to_bytes(raw), kMiB);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(to_bytes(*out), a);

  auto first = compress(Compression::kSnappy, a);
  auto second = compress(Compression::kSnappy, b);
  ASSERT_TRUE(first.ok() && second.ok());
  auto both = decompress(Compression::kSnappy, concat(to_bytes(*first), to_bytes(*second)), kMiB);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(to_bytes(*both), concat(a, b));
}

Bytes lz4_frame(const Bytes& in, const LZ4F_preferences_t& prefs) {
  Bytes out(LZ4F_compressFrameBound(in.size(), &prefs));
  const size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
  EXPECT_FALSE(LZ4F_isError(n)) << LZ4F_getErrorName(n);
  out.resize(n);
  return out;
}

TEST(CompressionLz4, WritesKafkaStyleFrames) {
  auto out = compress(Compression::kLz4, text_bytes(200000, 10));
  ASSERT_TRUE(out.ok());
  const Bytes f = to_bytes(*out);
  ASSERT_GE(f.size(), 7u);
  EXPECT_EQ(f[0], std::byte{0x04});
  EXPECT_EQ(f[1], std::byte{0x22});
  EXPECT_EQ(f[2], std::byte{0x4d});
  EXPECT_EQ(f[3], std::byte{0x18});
  // FLG: version 01, independent blocks; no block checksum, content size or
  // content checksum. BD: 64 KiB blocks.
  EXPECT_EQ(f[4], std::byte{0x60});
  EXPECT_EQ(f[5], std::byte{0x40});
}

TEST(CompressionLz4, ReadsEveryFrameVariantAndSeveralFrames) {
  const Bytes in = text_bytes(300000, 11);
  std::vector<Bytes> frames;
  LZ4F_preferences_t prefs;
  std::memset(&prefs, 0, sizeof prefs);
  frames.push_back(lz4_frame(in, prefs));  // linked 64 KiB blocks, no size
  prefs.frameInfo.contentSize = in.size();
  prefs.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
  prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  frames.push_back(lz4_frame(in, prefs));
  prefs.frameInfo.blockSizeID = LZ4F_max4MB;
  prefs.frameInfo.blockMode = LZ4F_blockIndependent;
  prefs.compressionLevel = 9;
  frames.push_back(lz4_frame(in, prefs));
  Bytes all;
  for (const Bytes& frame : frames) {
    auto out = decompress(Compression::kLz4, frame, in.size());
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(to_bytes(*out), in);
    all = concat(all, frame);
  }
  // A skippable frame (magic 0x184D2A50, LE length, payload) first.
  const Bytes skippable = to_bytes(std::string("\x50\x2a\x4d\x18\x03\x00\x00\x00xyz", 11));
  auto out = decompress(Compression::kLz4, concat(skippable, all), 3 * in.size());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(to_bytes(*out), concat(concat(in, in), in));
}

TEST(CompressionLz4, RejectsACorruptContentChecksum) {
  const Bytes in = text_bytes(5000, 12);
  LZ4F_preferences_t prefs;
  std::memset(&prefs, 0, sizeof prefs);
  prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  Bytes frame = lz4_frame(in, prefs);
  frame.back() ^= std::byte{0x01};
  EXPECT_EQ(decompress(Compression::kLz4, frame, kMiB).status().code(),
            absl::StatusCode::kDataLoss);
}

// The frame zstd-jni's ZstdOutputStream writes: streamed, no content size.
Bytes zstd_streamed(const Bytes& in, bool checksum) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  EXPECT_FALSE(ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, checksum ? 1 : 0)));
  Bytes out(ZSTD_compressBound(in.size()) + 1024);
  ZSTD_inBuffer src{in.data(), in.size(), 0};
  ZSTD_outBuffer dst{out.data(), out.size(), 0};
  // Feed in pieces so the frame cannot be a single-shot frame.
  size_t left = 1;
  while (src.pos < src.size) {
    const size_t piece = std::min<size_t>(src.size - src.pos, 10000);
    ZSTD_inBuffer chunk{static_cast<const std::byte*>(src.src) + src.pos, piece, 0};
    EXPECT_FALSE(ZSTD_isError(ZSTD_compressStream2(cctx, &dst, &chunk, ZSTD_e_continue)));
    src.pos += chunk.pos;
  }
  ZSTD_inBuffer none{nullptr, 0, 0};
  while (left != 0) {
    left = ZSTD_compressStream2(cctx, &dst, &none, ZSTD_e_end);
    EXPECT_FALSE(ZSTD_isError(left));
  }
  ZSTD_freeCCtx(cctx);
  out.resize(dst.pos);
  return out;
}

TEST(CompressionZstd, ReadsStreamedFramesWithoutContentSize) {
  const Bytes a = text_bytes(300000, 13);
  const Bytes b = random_bytes(20000, 14);
  const Bytes streamed = zstd_streamed(a, true);
  EXPECT_EQ(ZSTD_getFrameContentSize(streamed.data(), streamed.size()), ZSTD_CONTENTSIZE_UNKNOWN);
  auto out = decompress(Compression::kZstd, streamed, a.size());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(to_bytes(*out), a);

  Bytes simple(ZSTD_compressBound(b.size()));
  simple.resize(ZSTD_compress(simple.data(), simple.size(), b.data(), b.size(), 1));
  const Bytes skippable = to_bytes(std::string("\x50\x2a\x4d\x18\x02\x00\x00\x00zz", 10));
  auto both = decompress(Compression::kZstd, concat(concat(streamed, skippable), simple), kMiB);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(to_bytes(*both), concat(a, b));
}

TEST(CompressionZstd, RejectsACorruptChecksum) {
  Bytes frame = zstd_streamed(text_bytes(5000, 15), true);
  frame.back() ^= std::byte{0x01};
  EXPECT_EQ(decompress(Compression::kZstd, frame, kMiB).status().code(),
            absl::StatusCode::kDataLoss);
}

// --- Malformed input --------------------------------------------------------

TEST(Compression, EmptyCompressedInputIsDataLoss) {
  for (Compression c : kCodecs) {
    EXPECT_EQ(decompress(c, {}, kMiB).status().code(), absl::StatusCode::kDataLoss)
        << compression_name(c);
  }
}

TEST(Compression, GarbageIsDataLossNamingTheCodec) {
  const std::vector<Bytes> inputs = {to_bytes(std::string("hello, not compressed at all")),
                                     random_bytes(1000, 16), Bytes(64, std::byte{0xff}),
                                     to_bytes(std::string("\x82SNAPPY\x00\x00\x00", 10))};
  for (Compression c : kCodecs) {
    for (const Bytes& in : inputs) {
      const absl::Status status = decompress(c, in, kMiB).status();
      EXPECT_FALSE(status.ok()) << compression_name(c);
      EXPECT_TRUE(status.code() == absl::StatusCode::kDataLoss ||
                  status.code() == absl::StatusCode::kResourceExhausted)
          << status;
      if (status.code() == absl::StatusCode::kDataLoss) {
        EXPECT_TRUE(absl::StartsWith(std::string(status.message()),
                                     std::string(compression_name(c)) + ":"))
            << status;
      }
    }
  }
}

TEST(Compression, TruncatedStreamsAreErrors) {
  const Bytes in = text_bytes(150000, 17);
  for (Compression c : kCodecs) {
    auto compressed = compress(c, in);
    ASSERT_TRUE(compressed.ok());
    const Bytes whole = to_bytes(*compressed);
    for (size_t cut : {size_t{1}, size_t{5}, size_t{12}, size_t{17}, whole.size() / 3,
                       whole.size() / 2, whole.size() - 5, whole.size() - 1}) {
      auto out = decompress(c, std::span(whole).first(cut), kMiB);
      if (c == Compression::kSnappy && out.ok()) {
        // Xerial framing cut at a block boundary is a shorter valid stream;
        // anything else must fail.
        ASSERT_LT(out->size(), in.size());
        EXPECT_EQ(to_bytes(*out), Bytes(in.begin(), in.begin() + out->size()));
        continue;
      }
      EXPECT_FALSE(out.ok()) << compression_name(c) << " cut at " << cut;
    }
  }
}

RC_GTEST_PROP(Compression, ArbitraryBytesNeverCrash, (std::vector<uint8_t> raw)) {
  Bytes in(raw.size());
  std::transform(raw.begin(), raw.end(), in.begin(),
                 [](uint8_t b) { return static_cast<std::byte>(b); });
  for (Compression c : kCodecs) {
    auto out = decompress(c, in, 64 * 1024);
    if (out.ok()) {
      RC_ASSERT(out->size() <= 64u * 1024);
    } else {
      RC_ASSERT(out.status().code() == absl::StatusCode::kDataLoss ||
                out.status().code() == absl::StatusCode::kResourceExhausted);
    }
  }
}

RC_GTEST_PROP(Compression, CorruptedStreamsNeverCrash, (uint64_t seed)) {
  const Bytes in = text_bytes(*rc::gen::inRange<size_t>(1, 50000), seed);
  for (Compression c : kCodecs) {
    auto compressed = compress(c, in);
    RC_ASSERT(compressed.ok());
    Bytes bad = to_bytes(*compressed);
    const int flips = *rc::gen::inRange(1, 4);
    for (int i = 0; i < flips; ++i) {
      const size_t at = *rc::gen::inRange<size_t>(0, bad.size());
      bad[at] ^= static_cast<std::byte>(*rc::gen::inRange(1, 256));
    }
    auto out = decompress(c, bad, in.size() + 1000);
    if (out.ok()) RC_ASSERT(out->size() <= in.size() + 1000);
  }
}

// --- max_output ---------------------------------------------------------------

// Highly compressible input that expands to 16x the cap: every codec fails
// with ResourceExhausted, and no output allocation exceeds the cap.
TEST(Compression, MaxOutputStopsDecompressionBombs) {
  constexpr size_t kCap = kMiB;
  const Bytes zeros(16 * kMiB, std::byte{0});
  std::vector<std::pair<std::string, std::pair<Compression, Bytes>>> bombs;
  g_aligned_bytes_max.store(0);
  for (Compression c : kCodecs) {
    auto compressed = compress(c, zeros, c == Compression::kGzip ? 1 : kCompressionLevelDefault);
    ASSERT_TRUE(compressed.ok());
    bombs.push_back({std::string(compression_name(c)), {c, to_bytes(*compressed)}});
  }
  // The tracker sees io::Buffer allocations (compress sized some by its bound).
  ASSERT_GE(g_aligned_bytes_max.load(), zeros.size());
  bombs.push_back({"zstd streamed", {Compression::kZstd, zstd_streamed(zeros, false)}});
  std::string raw;
  snappy::Compress(reinterpret_cast<const char*>(zeros.data()), zeros.size(), &raw);
  bombs.push_back({"snappy raw", {Compression::kSnappy, to_bytes(raw)}});
  bombs.push_back({"snappy raw, 4 GiB claimed",
                   {Compression::kSnappy, to_bytes(std::string("\xff\xff\xff\xff\x0f\x00", 6))}});

  for (const auto& [name, bomb] : bombs) {
    const auto& [c, input] = bomb;
    EXPECT_LT(input.size(), 2 * kMiB) << name;
    g_aligned_bytes_max.store(0);
    const absl::Status status = decompress(c, input, kCap).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << name << ": " << status;
    // io::Buffer asks for its 64-byte header plus the capacity.
    EXPECT_LE(g_aligned_bytes_max.load(), 64 + kCap + 1) << name;
  }
}

TEST(Compression, RejectsBadLevelsAndCodecs) {
  const Bytes in = text_bytes(100, 18);
  EXPECT_EQ(compress(Compression::kGzip, in, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(compress(Compression::kGzip, in, -2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(compress(Compression::kLz4, in, 18).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(compress(Compression::kLz4, in, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(compress(Compression::kZstd, in, ZSTD_maxCLevel() + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(compress(Compression::kSnappy, in, 123).ok());  // snappy has no levels
  const auto bogus = static_cast<Compression>(6);
  EXPECT_EQ(compress(bogus, in).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(decompress(bogus, in, kMiB).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Compression, AttributesAndNames) {
  EXPECT_EQ(*compression_from_attributes(0), Compression::kNone);
  EXPECT_EQ(*compression_from_attributes(0x0014), Compression::kZstd);  // transactional bit + zstd
  EXPECT_EQ(*compression_from_attributes(0x0023), Compression::kLz4);
  EXPECT_EQ(compression_from_attributes(0x0005).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(compression_from_attributes(0x0007).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(compression_name(Compression::kSnappy), "snappy");
  EXPECT_EQ(compression_name(static_cast<Compression>(9)), "unknown");
}

}  // namespace
}  // namespace brook::codec
