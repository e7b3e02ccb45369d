// net/codec/varint_test.cc
//
// Varints encode to Kafka's bytes, round-trip every value, and decode
// malformed input exactly as Kafka's ByteUtils does: an error for truncated or
// over-long input, never a read outside the span.
#include "net/codec/varint.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

namespace brook::codec {
namespace {

std::vector<std::byte> bytes(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

std::vector<std::byte> encoded_varint(int32_t v) {
  std::vector<std::byte> out(kVarint32BytesMax);
  out.resize(encode_varint(v, out.data()));
  return out;
}

std::vector<std::byte> encoded_varlong(int64_t v) {
  std::vector<std::byte> out(kVarint64BytesMax);
  out.resize(encode_varlong(v, out.data()));
  return out;
}

// Values and encodings from Kafka's ByteUtilsTest and the zig-zag definition.
TEST(Varint, EncodesLikeKafka) {
  EXPECT_EQ(encoded_varint(0), bytes({0x00}));
  EXPECT_EQ(encoded_varint(-1), bytes({0x01}));
  EXPECT_EQ(encoded_varint(1), bytes({0x02}));
  EXPECT_EQ(encoded_varint(63), bytes({0x7e}));
  EXPECT_EQ(encoded_varint(-64), bytes({0x7f}));
  EXPECT_EQ(encoded_varint(64), bytes({0x80, 0x01}));
  EXPECT_EQ(encoded_varint(-65), bytes({0x81, 0x01}));
  EXPECT_EQ(encoded_varint(8191), bytes({0xfe, 0x7f}));
  EXPECT_EQ(encoded_varint(-8193), bytes({0x81, 0x80, 0x01}));
  EXPECT_EQ(encoded_varint(std::numeric_limits<int32_t>::max()),
            bytes({0xfe, 0xff, 0xff, 0xff, 0x0f}));
  EXPECT_EQ(encoded_varint(std::numeric_limits<int32_t>::min()),
            bytes({0xff, 0xff, 0xff, 0xff, 0x0f}));
  EXPECT_EQ(encoded_varlong(std::numeric_limits<int64_t>::max()),
            bytes({0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
  EXPECT_EQ(encoded_varlong(std::numeric_limits<int64_t>::min()),
            bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
  std::vector<std::byte> out(kVarint32BytesMax);
  EXPECT_EQ(encode_unsigned_varint(300, out.data()), 2u);
  EXPECT_EQ(out[0], std::byte{0xac});
  EXPECT_EQ(out[1], std::byte{0x02});
}

TEST(Varint, SizesMatchBoundaries) {
  EXPECT_EQ(size_of_unsigned_varint(0), 1u);
  EXPECT_EQ(size_of_unsigned_varint(127), 1u);
  EXPECT_EQ(size_of_unsigned_varint(128), 2u);
  EXPECT_EQ(size_of_unsigned_varint((1u << 14) - 1), 2u);
  EXPECT_EQ(size_of_unsigned_varint(1u << 14), 3u);
  EXPECT_EQ(size_of_unsigned_varint(1u << 28), 5u);
  EXPECT_EQ(size_of_unsigned_varint(~0u), 5u);
  EXPECT_EQ(size_of_unsigned_varlong(~0ull), 10u);
  EXPECT_EQ(size_of_unsigned_varlong(1ull << 63), 10u);
  EXPECT_EQ(size_of_unsigned_varlong((1ull << 63) - 1), 9u);
  EXPECT_EQ(size_of_varint(-64), 1u);
  EXPECT_EQ(size_of_varint(64), 2u);
  EXPECT_EQ(size_of_varlong(std::numeric_limits<int64_t>::min()), 10u);
}

TEST(Varint, TruncatedInputIsOutOfRange) {
  const std::vector<std::byte> full = encoded_varlong(std::numeric_limits<int64_t>::min());
  for (size_t n = 0; n < full.size(); ++n) {
    const auto result = decode_varlong(std::span(full).first(n));
    ASSERT_FALSE(result.ok()) << n;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kOutOfRange) << n;
  }
  const auto ok = decode_varlong(full);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->value, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ok->bytes, 10u);
}

// Kafka throws "Varint is too long" once the fifth (tenth) byte still has
// its continuation bit.
TEST(Varint, TooLongIsInvalidArgument) {
  const auto v32 = decode_varint(bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x00}));
  ASSERT_FALSE(v32.ok());
  EXPECT_EQ(v32.status().code(), absl::StatusCode::kInvalidArgument);
  const auto u32 = decode_unsigned_varint(bytes({0xff, 0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(u32.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::byte> eleven(10, std::byte{0x80});
  eleven.push_back(std::byte{0x00});
  EXPECT_EQ(decode_varlong(eleven).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_unsigned_varlong(eleven).status().code(), absl::StatusCode::kInvalidArgument);
  int32_t untouched = 42;
  EXPECT_EQ(read_varint(bytes({0x80, 0x80, 0x80, 0x80, 0x80}), &untouched), 0u);
  EXPECT_EQ(untouched, 42);
}

// Kafka accepts non-minimal encodings and drops the bits of the last byte that
// do not fit; so does Brook, to accept exactly what a Kafka broker accepts.
TEST(Varint, AcceptsWhatKafkaAccepts) {
  const auto padded = decode_unsigned_varint(bytes({0x80, 0x80, 0x00}));
  ASSERT_TRUE(padded.ok());
  EXPECT_EQ(padded->value, 0u);
  EXPECT_EQ(padded->bytes, 3u);
  const auto wide = decode_unsigned_varint(bytes({0xff, 0xff, 0xff, 0xff, 0x7f}));
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->value, 0xffffffffu);
  EXPECT_EQ(wide->bytes, 5u);
  std::vector<std::byte> ten(9, std::byte{0xff});
  ten.push_back(std::byte{0x7f});
  const auto wide64 = decode_unsigned_varlong(ten);
  ASSERT_TRUE(wide64.ok());
  EXPECT_EQ(wide64->value, ~0ull);
}

TEST(Varint, StopsAtTheFirstByteWithoutContinuation) {
  const auto two = decode_varint(bytes({0x80, 0x01, 0xff, 0xff}));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->value, 64);
  EXPECT_EQ(two->bytes, 2u);
}

RC_GTEST_PROP(Varint, Int32RoundTrips, (int32_t v, std::vector<uint8_t> tail)) {
  std::vector<std::byte> buf(kVarint32BytesMax + tail.size());
  const size_t n = encode_varint(v, buf.data());
  RC_ASSERT(n == size_of_varint(v));
  std::transform(tail.begin(), tail.end(), buf.begin() + static_cast<ptrdiff_t>(n),
                 [](uint8_t b) { return static_cast<std::byte>(b); });
  buf.resize(n + tail.size());
  const auto decoded = decode_varint(buf);
  RC_ASSERT(decoded.ok());
  RC_ASSERT(decoded->value == v);
  RC_ASSERT(decoded->bytes == n);
}

RC_GTEST_PROP(Varint, Int64RoundTrips, (int64_t v)) {
  std::byte buf[kVarint64BytesMax];
  const size_t n = encode_varlong(v, buf);
  RC_ASSERT(n == size_of_varlong(v));
  const auto decoded = decode_varlong(std::span(buf, n));
  RC_ASSERT(decoded.ok());
  RC_ASSERT(decoded->value == v);
  RC_ASSERT(decoded->bytes == n);
}

RC_GTEST_PROP(Varint, UnsignedRoundTrips, (uint32_t v32, uint64_t v64)) {
  std::byte buf[kVarint64BytesMax];
  size_t n = encode_unsigned_varint(v32, buf);
  RC_ASSERT(n == size_of_unsigned_varint(v32));
  uint32_t out32 = 0;
  RC_ASSERT(read_unsigned_varint(std::span(buf, n), &out32) == n);
  RC_ASSERT(out32 == v32);
  n = encode_unsigned_varlong(v64, buf);
  RC_ASSERT(n == size_of_unsigned_varlong(v64));
  uint64_t out64 = 0;
  RC_ASSERT(read_unsigned_varlong(std::span(buf, n), &out64) == n);
  RC_ASSERT(out64 == v64);
}

// Small magnitudes are the common case and must stay short.
RC_GTEST_PROP(Varint, ZigZagKeepsSmallValuesShort, (int16_t small)) {
  RC_ASSERT(zigzag_decode32(zigzag_encode32(small)) == small);
  RC_ASSERT(zigzag_decode64(zigzag_encode64(small)) == small);
  RC_ASSERT(zigzag_encode32(small) == static_cast<uint32_t>(small >= 0 ? 2 * small : -2 * small - 1));
  RC_ASSERT(size_of_varint(small) <= 3u);
}

// Arbitrary bytes decode to a value that re-reads the same way, or to an
// error; the reported length never leaves the span or the type's limit.
RC_GTEST_PROP(Varint, ArbitraryBytesDecodeOrFail, (std::vector<uint8_t> raw)) {
  std::vector<std::byte> in(raw.size());
  std::transform(raw.begin(), raw.end(), in.begin(),
                 [](uint8_t b) { return static_cast<std::byte>(b); });
  const auto v32 = decode_varint(in);
  if (v32.ok()) {
    RC_ASSERT(v32->bytes >= 1u);
    RC_ASSERT(v32->bytes <= std::min(in.size(), kVarint32BytesMax));
  } else {
    const bool too_long = in.size() >= kVarint32BytesMax;
    RC_ASSERT(v32.status().code() ==
              (too_long ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kOutOfRange));
  }
  const auto v64 = decode_varlong(in);
  if (v64.ok()) {
    RC_ASSERT(v64->bytes >= 1u);
    RC_ASSERT(v64->bytes <= std::min(in.size(), kVarint64BytesMax));
  }
}

// The word-at-a-time fast path (8 or more bytes available) and the
// byte-at-a-time loop agree on every input.
RC_GTEST_PROP(Varint, FastAndByteLoopPathsAgree, (std::vector<uint8_t> raw)) {
  const size_t continued = *rc::gen::inRange<size_t>(0, 11);
  std::vector<std::byte> in(continued, std::byte{0x80});
  for (uint8_t b : raw) in.push_back(static_cast<std::byte>(b));
  while (in.size() < 8) in.push_back(std::byte{0x00});
  uint32_t fast32 = 1;
  uint32_t slow32 = 1;
  RC_ASSERT(read_unsigned_varint(in, &fast32) ==
            (detail::read_unsigned_slow<uint32_t, kVarint32BytesMax>(in, &slow32)));
  RC_ASSERT(fast32 == slow32);
  uint64_t fast64 = 1;
  uint64_t slow64 = 1;
  RC_ASSERT(read_unsigned_varlong(in, &fast64) ==
            (detail::read_unsigned_slow<uint64_t, kVarint64BytesMax>(in, &slow64)));
  RC_ASSERT(fast64 == slow64);
}

}  // namespace
}  // namespace brook::codec
