// net/kafka/record_batch_test.cc: v2 record batches, built, iterated,
// decoded, and rejected when malformed.
#include "net/kafka/record_batch.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "net/codec/varint.h"

namespace brook::net {
namespace {

using codec::Compression;

constexpr std::array<Compression, 5> kAllCodecs = {Compression::kNone, Compression::kGzip,
                                                   Compression::kSnappy, Compression::kLz4,
                                                   Compression::kZstd};
constexpr size_t kCap = 1 << 20;

io::Buffer buf(std::string_view s) { return io::Buffer::copy_of(s); }
std::string str(const io::Buffer& b) { return std::string(b.view()); }

// Big-endian appends, written out independently of the code under test.
void put(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_text(std::vector<uint8_t>& out, std::string_view s) { out.insert(out.end(), s.begin(), s.end()); }

// Bitwise CRC-32C (reflected polynomial 0x82F63B78), independent of net/codec.
uint32_t reference_crc32c(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
  }
  return ~c;
}

io::Buffer to_buffer(const std::vector<uint8_t>& v) {
  return io::Buffer::copy_of(std::as_bytes(std::span(v.data(), v.size())));
}

// A batch header around arbitrary record bytes, with a correct length and
// CRC, so that only the records can be wrong.
io::Buffer batch_with_payload(const std::vector<uint8_t>& payload, int32_t count,
                              int16_t attributes = 0) {
  std::vector<uint8_t> b;
  put(b, 100, 8);                                  // baseOffset
  put(b, 49 + payload.size(), 4);                  // batchLength
  put(b, 0, 4);                                    // partitionLeaderEpoch
  put(b, 2, 1);                                    // magic
  put(b, 0, 4);                                    // crc, below
  put(b, static_cast<uint16_t>(attributes), 2);    // attributes
  put(b, count > 0 ? count - 1 : 0, 4);            // lastOffsetDelta
  put(b, 1000, 8);                                 // baseTimestamp
  put(b, 1000, 8);                                 // maxTimestamp
  put(b, static_cast<uint64_t>(-1), 8);            // producerId
  put(b, 0xffff, 2);                               // producerEpoch
  put(b, 0xffffffff, 4);                           // baseSequence
  put(b, static_cast<uint32_t>(count), 4);         // recordsCount
  b.insert(b.end(), payload.begin(), payload.end());
  const uint32_t crc = reference_crc32c(b.data() + 21, b.size() - 21);
  for (int i = 0; i < 4; ++i) b[17 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  return to_buffer(b);
}

// Rewrites batchLength to the buffer's size and recomputes the CRC.
io::Buffer refit(std::vector<uint8_t> b) {
  const auto length = static_cast<uint32_t>(b.size() - 12);
  for (int i = 0; i < 4; ++i) b[8 + i] = static_cast<uint8_t>(length >> (24 - 8 * i));
  const uint32_t crc = reference_crc32c(b.data() + 21, b.size() - 21);
  for (int i = 0; i < 4; ++i) b[17 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  return to_buffer(b);
}

std::vector<uint8_t> bytes_of(const io::Buffer& b) {
  const auto* p = reinterpret_cast<const uint8_t*>(b.data());
  return std::vector<uint8_t>(p, p + b.size());
}

io::Buffer concat(const std::vector<io::Buffer>& parts) {
  io::BufferChain chain;
  for (const io::Buffer& p : parts) chain.append(p);
  return chain.linearize();
}

NewRecord record(int64_t ts, std::optional<std::string> key, std::optional<std::string> value,
                 std::vector<RecordHeader> headers = {}) {
  NewRecord r;
  r.timestamp_ms = ts;
  if (key) r.key = buf(*key);
  if (value) r.value = buf(*value);
  r.headers = std::move(headers);
  return r;
}

io::Buffer build(const RecordBatchOptions& options, const std::vector<NewRecord>& records) {
  RecordBatchBuilder builder(options);
  for (const NewRecord& r : records) builder.append(r);
  absl::StatusOr<io::Buffer> batch = builder.build();
  EXPECT_TRUE(batch.ok()) << batch.status();
  return batch.ok() ? *batch : io::Buffer();
}

io::Buffer sample_batch(Compression codec, int64_t base_offset = 0, int records = 3) {
  RecordBatchOptions o;
  o.base_offset = base_offset;
  o.compression = codec;
  std::vector<NewRecord> rs;
  for (int i = 0; i < records; ++i) {
    rs.push_back(record(1000 + i, "key" + std::to_string(i), std::string(50, 'a' + i),
                        {{"h", buf("v")}}));
  }
  return build(o, rs);
}

// The format worked out by hand: one uncompressed record, key "k", value
// "hello", one header h=v.
TEST(RecordBatch, KnownBytesOfAnUncompressedSingleRecordBatch) {
  std::vector<uint8_t> rec;
  put(rec, 0x20, 1);  // length 16, zig-zag: 32
  put(rec, 0, 1);     // attributes
  put(rec, 0, 1);     // timestampDelta 0
  put(rec, 0, 1);     // offsetDelta 0
  put(rec, 0x02, 1);  // keyLength 1
  put_text(rec, "k");
  put(rec, 0x0a, 1);  // valueLength 5
  put_text(rec, "hello");
  put(rec, 0x02, 1);  // 1 header
  put(rec, 0x02, 1);
  put_text(rec, "h");
  put(rec, 0x02, 1);
  put_text(rec, "v");
  ASSERT_EQ(rec.size(), 17u);

  std::vector<uint8_t> want;
  put(want, 5, 8);       // baseOffset
  put(want, 66, 4);      // batchLength: 49 + 17
  put(want, 7, 4);       // partitionLeaderEpoch
  put(want, 2, 1);       // magic
  put(want, 0, 4);       // crc (below)
  put(want, 0, 2);       // attributes
  put(want, 0, 4);       // lastOffsetDelta
  put(want, 1000, 8);    // baseTimestamp
  put(want, 1000, 8);    // maxTimestamp
  put(want, 42, 8);      // producerId
  put(want, 3, 2);       // producerEpoch
  put(want, 9, 4);       // baseSequence
  put(want, 1, 4);       // recordsCount
  ASSERT_EQ(want.size(), 61u);
  want.insert(want.end(), rec.begin(), rec.end());
  const uint32_t crc = reference_crc32c(want.data() + 21, want.size() - 21);
  for (int i = 0; i < 4; ++i) want[17 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));

  RecordBatchOptions o;
  o.base_offset = 5;
  o.partition_leader_epoch = 7;
  o.producer_id = 42;
  o.producer_epoch = 3;
  o.base_sequence = 9;
  const io::Buffer batch = build(o, {record(1000, "k", "hello", {{"h", buf("v")}})});
  EXPECT_EQ(bytes_of(batch), want);

  // And the parser reads the hand-made bytes.
  const io::Buffer given = to_buffer(want);
  absl::StatusOr<RecordBatchHeader> h = parse_batch_header(given.span());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->base_offset, 5);
  EXPECT_EQ(h->batch_length, 66);
  EXPECT_EQ(h->partition_leader_epoch, 7);
  EXPECT_EQ(h->crc, crc);
  EXPECT_EQ(h->producer_id, 42);
  EXPECT_EQ(h->producer_epoch, 3);
  EXPECT_EQ(h->base_sequence, 9);
  EXPECT_EQ(h->records_count, 1);
  EXPECT_EQ(h->size_bytes(), 78u);
  EXPECT_EQ(h->last_offset(), 5);
  EXPECT_EQ(h->next_offset(), 6);
  EXPECT_EQ(h->compression(), Compression::kNone);
  EXPECT_TRUE(verify_crc(*h, given.span()).ok());
  absl::StatusOr<std::vector<Record>> records = decode_records(given, kCap);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 1u);
  const Record& r = (*records)[0];
  EXPECT_EQ(str(*r.key), "k");
  EXPECT_EQ(str(*r.value), "hello");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].key, "h");
  EXPECT_EQ(str(*r.headers[0].value), "v");
  EXPECT_EQ(record_offset(*h, r), 5);
  EXPECT_EQ(record_timestamp(*h, r), 1000);
  // Keys and values are slices of the batch, not copies.
  EXPECT_GE(r.value->data(), given.data());
  EXPECT_LE(r.value->data() + r.value->size(), given.data() + given.size());
}

TEST(RecordBatch, AttributeAccessors) {
  RecordBatchHeader h;
  h.attributes = 4 | kBatchTimestampTypeBit | kBatchTransactionalBit;
  EXPECT_EQ(h.compression(), Compression::kZstd);
  EXPECT_EQ(h.timestamp_type(), TimestampType::kLogAppendTime);
  EXPECT_TRUE(h.is_transactional());
  EXPECT_FALSE(h.is_control());
  EXPECT_FALSE(h.has_delete_horizon());
  h.attributes = kBatchControlBit | kBatchDeleteHorizonBit;
  EXPECT_EQ(h.compression(), Compression::kNone);
  EXPECT_EQ(h.timestamp_type(), TimestampType::kCreateTime);
  EXPECT_FALSE(h.is_transactional());
  EXPECT_TRUE(h.is_control());
  EXPECT_TRUE(h.has_delete_horizon());
  h.base_offset = std::numeric_limits<int64_t>::max();
  h.last_offset_delta = 1;
  EXPECT_EQ(h.last_offset(), std::numeric_limits<int64_t>::min());  // wraps like Java
}

// Every option lands in the header it is meant for, and back.
TEST(RecordBatch, BuilderOptionsReachTheHeader) {
  RecordBatchOptions o;
  o.base_offset = 1'000'000'000'000;
  o.partition_leader_epoch = 12;
  o.producer_id = 77;
  o.producer_epoch = 5;
  o.base_sequence = 100;
  o.transactional = true;
  o.timestamp_type = TimestampType::kLogAppendTime;
  o.log_append_time_ms = 5555;
  o.delete_horizon_ms = 4000;
  o.compression = Compression::kLz4;
  const io::Buffer batch =
      build(o, {record(3000, "a", "x"), record(2000, std::nullopt, "y"), record(3500, "c", {})});
  absl::StatusOr<RecordBatchHeader> h = parse_batch_header(batch.span());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->compression(), Compression::kLz4);
  EXPECT_TRUE(h->is_transactional());
  EXPECT_FALSE(h->is_control());
  EXPECT_TRUE(h->has_delete_horizon());
  EXPECT_EQ(h->timestamp_type(), TimestampType::kLogAppendTime);
  EXPECT_EQ(h->base_timestamp, 4000);
  EXPECT_EQ(h->max_timestamp, 5555);
  EXPECT_EQ(h->last_offset_delta, 2);
  EXPECT_EQ(h->last_offset(), 1'000'000'000'002);
  EXPECT_EQ(h->records_count, 3);
  EXPECT_EQ(h->base_sequence, 100);
  EXPECT_TRUE(verify_crc(*h, batch.span()).ok());
  absl::StatusOr<std::vector<Record>> records = decode_records(batch, kCap);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[1].timestamp_delta, -2000);  // relative to the horizon
  EXPECT_EQ(record_timestamp(*h, (*records)[1]), 5555);  // LogAppendTime wins
  EXPECT_FALSE((*records)[1].key.has_value());
  EXPECT_FALSE((*records)[2].value.has_value());
  EXPECT_EQ(record_offset(*h, (*records)[2]), 1'000'000'000'002);
}

TEST(RecordBatch, EmptyBatch) {
  const io::Buffer batch = build(RecordBatchOptions{}, {});
  absl::StatusOr<RecordBatchHeader> h = parse_batch_header(batch.span());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->records_count, 0);
  EXPECT_EQ(h->size_bytes(), kBatchHeaderBytes);
  EXPECT_EQ(h->base_timestamp, kNoTimestamp);
  absl::StatusOr<std::vector<Record>> records = decode_records(batch, kCap);
  ASSERT_TRUE(records.ok());
  EXPECT_TRUE(records->empty());
}

// Random records through every codec: build, iterate, decode, compare.
// Timestamps span the whole int64 range, so deltas wrap as in Java.
RC_GTEST_PROP(RecordBatch, RoundTripEveryCodec, ()) {
  const auto n = *rc::gen::inRange(0, 20);
  const auto base_offset = *rc::gen::inRange<int64_t>(0, int64_t{1} << 50);
  const auto base_ts = *rc::gen::arbitrary<int64_t>();
  RecordBatchOptions o;
  o.base_offset = base_offset;
  o.producer_id = *rc::gen::inRange<int64_t>(-1, 1000);
  o.transactional = *rc::gen::arbitrary<bool>();
  std::vector<NewRecord> in;
  for (int i = 0; i < n; ++i) {
    NewRecord r;
    r.timestamp_ms = static_cast<int64_t>(static_cast<uint64_t>(base_ts) +
                                          *rc::gen::inRange<uint64_t>(0, 200000));
    if (*rc::gen::arbitrary<bool>()) r.key = buf(*rc::gen::arbitrary<std::string>());
    if (*rc::gen::inRange(0, 4) != 0) r.value = buf(*rc::gen::arbitrary<std::string>());
    const auto headers = *rc::gen::inRange(0, 4);
    for (int k = 0; k < headers; ++k) {
      RecordHeader h{*rc::gen::arbitrary<std::string>(), std::nullopt};
      if (*rc::gen::arbitrary<bool>()) h.value = buf(*rc::gen::arbitrary<std::string>());
      r.headers.push_back(std::move(h));
    }
    in.push_back(std::move(r));
  }
  for (Compression codec : kAllCodecs) {
    o.compression = codec;
    RecordBatchBuilder builder(o);
    for (const NewRecord& r : in) builder.append(r);
    absl::StatusOr<io::Buffer> batch = builder.build();
    RC_ASSERT(batch.ok());

    BatchIterator it(*batch);
    absl::StatusOr<std::optional<BatchView>> view = it.next();
    RC_ASSERT(view.ok());
    RC_ASSERT(view->has_value());
    const RecordBatchHeader& h = (*view)->header;
    RC_ASSERT(h.compression() == codec);
    RC_ASSERT(h.base_offset == base_offset);
    RC_ASSERT(h.records_count == n);
    RC_ASSERT(h.is_transactional() == o.transactional);
    absl::StatusOr<std::optional<BatchView>> end = it.next();
    RC_ASSERT(end.ok());
    RC_ASSERT(!end->has_value());
    RC_ASSERT(it.partial_bytes() == 0u);

    absl::StatusOr<std::vector<Record>> out = decode_records((*view)->bytes, kCap);
    RC_ASSERT(out.ok());
    RC_ASSERT(out->size() == in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const Record& r = (*out)[i];
      RC_ASSERT(record_offset(h, r) == base_offset + static_cast<int64_t>(i));
      RC_ASSERT(record_timestamp(h, r) == in[i].timestamp_ms);
      RC_ASSERT(r.key == in[i].key);
      RC_ASSERT(r.value == in[i].value);
      RC_ASSERT(r.headers == in[i].headers);
    }
  }
}

TEST(BatchIterator, YieldsEachBatchAsASliceAndReportsAPartialTail) {
  const io::Buffer a = sample_batch(Compression::kNone, 0);
  const io::Buffer b = sample_batch(Compression::kZstd, 3);
  const io::Buffer c = sample_batch(Compression::kGzip, 6);
  const io::Buffer all = concat({a, b, c});
  for (size_t cut = 0; cut <= c.size(); ++cut) {
    const io::Buffer records = all.slice(0, a.size() + b.size() + cut);
    BatchIterator it(records);
    std::vector<int64_t> offsets;
    for (;;) {
      absl::StatusOr<std::optional<BatchView>> next = it.next();
      ASSERT_TRUE(next.ok()) << cut << ": " << next.status();
      if (!next->has_value()) break;
      offsets.push_back((*next)->header.base_offset);
      EXPECT_EQ((*next)->bytes.size(), (*next)->header.size_bytes());
      EXPECT_GE((*next)->bytes.data(), records.data());  // a slice, not a copy
      EXPECT_LT((*next)->bytes.data(), records.data() + records.size());
    }
    const bool whole = cut == c.size();
    const std::vector<int64_t> want = whole ? std::vector<int64_t>{0, 3, 6}
                                            : std::vector<int64_t>{0, 3};
    EXPECT_EQ(offsets, want);
    EXPECT_EQ(it.partial_bytes(), whole ? 0 : cut);
    EXPECT_EQ(it.position(), a.size() + b.size() + (whole ? c.size() : 0));

    // Where a partial batch is not acceptable it is an OutOfRange error.
    BatchIterator strict(records, {.partial = PartialBatch::kReject});
    absl::Status status;
    for (int i = 0; i < 4 && status.ok(); ++i) {
      absl::StatusOr<std::optional<BatchView>> next = strict.next();
      if (!next.ok()) status = next.status();
      if (next.ok() && !next->has_value()) break;
    }
    if (whole || cut == 0) {
      EXPECT_TRUE(status.ok()) << status;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << cut << ": " << status;
    }
  }
}

TEST(BatchIterator, ErrorsAreStickyAndLimitsApply) {
  const io::Buffer a = sample_batch(Compression::kNone);
  std::vector<uint8_t> bad = bytes_of(a);
  bad[bad.size() - 1] ^= 1;
  const io::Buffer records = concat({a, to_buffer(bad), a});
  BatchIterator it(records);
  ASSERT_TRUE(it.next().ok());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::optional<BatchView>> next = it.next();
    ASSERT_FALSE(next.ok());
    EXPECT_EQ(next.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(std::string(next.status().message()).find("CRC"), std::string::npos);
  }
  // Without the CRC check the corrupt batch passes the iterator.
  BatchIterator lax(records, {.crc = CrcCheck::kSkip});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(lax.next().ok());

  BatchIterator small(a, {.batch_bytes_max = a.size() - 1});
  absl::StatusOr<std::optional<BatchView>> next = small.next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kResourceExhausted);
}

// Every single-bit flip in the CRC-covered bytes (attributes to the end) is
// caught: by the CRC, or earlier by a header check.
TEST(RecordBatch, CrcCorruptionIsDetected) {
  for (Compression codec : kAllCodecs) {
    const io::Buffer batch = sample_batch(codec);
    for (size_t i = kBatchCrcOffset; i < batch.size(); ++i) {
      for (int bit = 0; bit < 8; bit += 3) {
        std::vector<uint8_t> b = bytes_of(batch);
        b[i] ^= static_cast<uint8_t>(1 << bit);
        const io::Buffer corrupt = to_buffer(b);
        BatchIterator it(corrupt);
        absl::StatusOr<std::optional<BatchView>> next = it.next();
        ASSERT_FALSE(next.ok()) << i;
        EXPECT_EQ(next.status().code(), absl::StatusCode::kDataLoss) << i << next.status();
        absl::StatusOr<RecordBatchHeader> h = parse_batch_header(corrupt.span());
        if (h.ok()) {
          EXPECT_FALSE(verify_crc(*h, corrupt.span()).ok()) << i;
        }
      }
    }
  }
}

// A prefix of a batch is a partial batch for every reader; a batch whose
// header is refitted to the prefix fails cleanly in its records.
TEST(RecordBatch, TruncationAtEveryByteIsRejected) {
  for (Compression codec : kAllCodecs) {
    const io::Buffer batch = sample_batch(codec);
    for (size_t n = 0; n < batch.size(); ++n) {
      const io::Buffer prefix = batch.slice(0, n);
      absl::StatusOr<RecordBatchHeader> h = parse_batch_header(prefix.span());
      ASSERT_FALSE(h.ok());
      EXPECT_EQ(h.status().code(), absl::StatusCode::kOutOfRange) << n << h.status();
      EXPECT_FALSE(decode_records(prefix, kCap).ok());
      BatchIterator it(prefix);
      absl::StatusOr<std::optional<BatchView>> next = it.next();
      ASSERT_TRUE(next.ok());
      EXPECT_FALSE(next->has_value());
      EXPECT_EQ(it.partial_bytes(), n);
      if (n < kBatchHeaderBytes) continue;
      std::vector<uint8_t> b = bytes_of(prefix);
      const io::Buffer refitted = refit(b);
      absl::StatusOr<std::vector<Record>> records = decode_records(refitted, kCap);
      ASSERT_FALSE(records.ok()) << compression_name(codec) << " " << n;
      EXPECT_EQ(records.status().code(), absl::StatusCode::kDataLoss) << records.status();
    }
  }
}

TEST(RecordBatch, HeaderChecks) {
  std::vector<uint8_t> good = bytes_of(sample_batch(Compression::kNone));
  auto with = [&](size_t offset, uint64_t v, int bytes) {
    std::vector<uint8_t> b = good;
    for (int i = 0; i < bytes; ++i) b[offset + i] = static_cast<uint8_t>(v >> (8 * (bytes - 1 - i)));
    return to_buffer(b);
  };
  auto code = [](const io::Buffer& b) { return parse_batch_header(b.span()).status().code(); };
  EXPECT_EQ(code(with(kBatchMagicOffset, 0, 1)), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(code(with(kBatchMagicOffset, 1, 1)), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(code(with(kBatchMagicOffset, 3, 1)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(with(kBatchMagicOffset, 0xff, 1)), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(parse_batch_header(with(kBatchMagicOffset, 1, 1).span()).status().message())
                .find("magic 1"),
            std::string::npos);
  EXPECT_EQ(code(with(kBatchLengthOffset, 13, 4)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(with(kBatchLengthOffset, 0xffffffff, 4)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(with(kBatchLengthOffset, 48, 4)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(with(kBatchLengthOffset, 0x7fffffff, 4)), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(code(with(kBatchRecordsCountOffset, 0xffffffff, 4)), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code(with(kBatchLastOffsetDeltaOffset, 0x80000000, 4)), absl::StatusCode::kDataLoss);
  // A header alone parses when only the header is asked for.
  const io::Buffer header_only = to_buffer(good).slice(0, kBatchHeaderBytes);
  EXPECT_EQ(code(header_only), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(parse_batch_header(header_only.span(), BatchExtent::kHeaderOnly).ok());
  // Codec ids 5-7 are corrupt when the records are read.
  const io::Buffer codec6 = batch_with_payload({}, 1, 6);
  EXPECT_TRUE(parse_batch_header(codec6.span()).ok());
  EXPECT_EQ(decode_records(codec6, kCap).status().code(), absl::StatusCode::kDataLoss);
  // verify_crc wants the batch's exact bytes.
  const io::Buffer good_batch = to_buffer(good);
  absl::StatusOr<RecordBatchHeader> h = parse_batch_header(good_batch.span());
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(verify_crc(*h, good_batch.slice(0, 70).span()).code(),
            absl::StatusCode::kInvalidArgument);
}

// Zig-zag varints, via the (separately tested) codec.
std::vector<uint8_t> vi(int64_t v) {
  std::byte out[codec::kVarint64BytesMax];
  const size_t n = codec::encode_varlong(v, out);
  std::vector<uint8_t> b;
  for (size_t i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(out[i]));
  return b;
}
std::vector<uint8_t> cat(std::initializer_list<std::vector<uint8_t>> parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
// A record whose length prefix is `length`, followed by `fields`.
std::vector<uint8_t> rec(int64_t length, std::vector<uint8_t> fields) {
  return cat({vi(length), fields});
}
// A record whose length prefix is right.
std::vector<uint8_t> rec(std::vector<uint8_t> fields) {
  return rec(static_cast<int64_t>(fields.size()), fields);
}

// One-record payloads whose lengths lie.
TEST(RecordBatch, LyingLengthsAreRejected) {
  struct Case {
    const char* what;
    std::vector<uint8_t> payload;
    int32_t count;
  };
  // attributes, timestampDelta 0, offsetDelta 0; then key and value null.
  const std::vector<uint8_t> start = {0, 0, 0};
  const std::vector<uint8_t> nulls = cat({vi(-1), vi(-1)});
  const std::vector<uint8_t> ok_record = rec(cat({start, nulls, vi(0)}));
  ASSERT_EQ(ok_record.size(), kRecordBytesMin);
  const std::vector<Case> cases = {
      {"record length past the end", rec(32, cat({start, nulls, vi(0)})), 1},
      {"record length shorter than its fields", rec(5, cat({start, nulls, vi(0)})), 1},
      {"record length longer than its fields", rec(7, cat({start, nulls, vi(0), {0}})), 1},
      // The first record's length also covers the second, a valid record.
      {"record length covering the next record", rec(13, cat({start, nulls, vi(0), ok_record})),
       2},
      {"negative record length", rec(-2, cat({start, nulls, vi(0)})), 1},
      {"key length -2", rec(cat({start, vi(-2), vi(-1), vi(0)})), 1},
      {"value length -3", rec(cat({start, vi(-1), vi(-3), vi(0)})), 1},
      {"key past the record", rec(cat({start, vi(4), {'a'}, vi(-1), vi(0)})), 1},
      {"key length past the batch", rec(cat({start, vi(1'000'000), vi(-1), vi(0)})), 1},
      {"headers count huge", rec(cat({start, nulls, vi(1'000'000'000)})), 1},
      {"headers count past the record", rec(cat({start, nulls, vi(2), vi(0), vi(0)})), 1},
      {"headers count negative", rec(cat({start, nulls, vi(-1)})), 1},
      {"header key null", rec(cat({start, nulls, vi(1), vi(-1), vi(-1)})), 1},
      {"header key length -5", rec(cat({start, nulls, vi(1), vi(-5), vi(-1)})), 1},
      {"header value length -2", rec(cat({start, nulls, vi(1), vi(1), {'h'}, vi(-2)})), 1},
      {"header past the record", rec(cat({start, nulls, vi(1), vi(1)})), 1},
      {"overlong varint",
       rec(cat({{0}, std::vector<uint8_t>(10, 0xff), {1}, {0}, nulls, vi(0)})), 1},
      {"varint cut by the record end", rec(2, cat({{0, 0x80}, {0}, nulls, vi(0)})), 1},
      {"count larger than the records", ok_record, 2},
      {"count huge", ok_record, 1'000'000'000},
      {"bytes after the last record", cat({ok_record, {0}}), 1},
      {"records count 1, no records", {}, 1},
  };
  // The valid record itself decodes, and so does a header-laden one.
  absl::StatusOr<std::vector<Record>> valid =
      decode_records(batch_with_payload(ok_record, 1), kCap);
  ASSERT_TRUE(valid.ok()) << valid.status();
  ASSERT_EQ(valid->size(), 1u);
  absl::StatusOr<std::vector<Record>> with_header = decode_records(
      batch_with_payload(rec(cat({start, nulls, vi(1), vi(1), {'h'}, vi(-1)})), 1), kCap);
  ASSERT_TRUE(with_header.ok()) << with_header.status();
  EXPECT_EQ((*with_header)[0].headers, (std::vector<RecordHeader>{{"h", std::nullopt}}));
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<Record>> records =
        decode_records(batch_with_payload(c.payload, c.count), kCap);
    ASSERT_FALSE(records.ok()) << c.what;
    EXPECT_EQ(records.status().code(), absl::StatusCode::kDataLoss) << c.what;
  }
}

// A small compressed batch that expands past the cap is refused without
// holding more than the cap.
TEST(RecordBatch, DecompressionIsCapped) {
  for (Compression codec : kAllCodecs) {
    if (codec == Compression::kNone) continue;
    RecordBatchOptions o;
    o.compression = codec;
    const io::Buffer batch = build(o, {record(0, std::nullopt, std::string(4 << 20, 'z'))});
    EXPECT_LT(batch.size(), 256u << 10) << compression_name(codec);
    absl::StatusOr<std::vector<Record>> capped = decode_records(batch, 64 << 10);
    ASSERT_FALSE(capped.ok());
    EXPECT_EQ(capped.status().code(), absl::StatusCode::kResourceExhausted) << capped.status();
    absl::StatusOr<std::vector<Record>> fits = decode_records(batch, 5 << 20);
    ASSERT_TRUE(fits.ok()) << fits.status();
    EXPECT_EQ((*fits)[0].value->size(), 4u << 20);
  }
}

TEST(ControlBatch, CommitAndAbortMarkersRoundTrip) {
  for (ControlRecordType type : {ControlRecordType::kCommit, ControlRecordType::kAbort}) {
    const io::Buffer batch = build_txn_marker_batch({.type = type,
                                                     .base_offset = 40,
                                                     .partition_leader_epoch = 3,
                                                     .producer_id = 9000,
                                                     .producer_epoch = 4,
                                                     .coordinator_epoch = 17,
                                                     .timestamp_ms = 123456});
    BatchIterator it(batch);
    absl::StatusOr<std::optional<BatchView>> view = it.next();
    ASSERT_TRUE(view.ok() && view->has_value()) << view.status();
    const RecordBatchHeader& h = (*view)->header;
    EXPECT_TRUE(h.is_control());
    EXPECT_TRUE(h.is_transactional());
    EXPECT_EQ(h.producer_id, 9000);
    EXPECT_EQ(h.producer_epoch, 4);
    EXPECT_EQ(h.base_sequence, kNoSequence);
    EXPECT_EQ(h.base_offset, 40);
    EXPECT_EQ(h.partition_leader_epoch, 3);
    EXPECT_EQ(h.records_count, 1);
    absl::StatusOr<std::vector<Record>> records = decode_records((*view)->bytes, kCap);
    ASSERT_TRUE(records.ok()) << records.status();
    ASSERT_EQ(records->size(), 1u);
    const Record& r = (*records)[0];
    ASSERT_TRUE(r.key && r.value);
    absl::StatusOr<ControlRecordKey> key = decode_control_record_key(r.key->span());
    ASSERT_TRUE(key.ok());
    EXPECT_EQ(key->version, 0);
    EXPECT_EQ(key->type, type);
    absl::StatusOr<EndTxnMarker> marker = decode_end_txn_marker(r.value->span());
    ASSERT_TRUE(marker.ok());
    EXPECT_EQ(marker->version, 0);
    EXPECT_EQ(marker->coordinator_epoch, 17);
    EXPECT_EQ(record_timestamp(h, r), 123456);
  }
}

TEST(ControlBatch, KeyAndMarkerBytes) {
  EXPECT_EQ(str(encode_control_record_key({0, ControlRecordType::kCommit})),
            std::string("\0\0\0\1", 4));
  EXPECT_EQ(str(encode_end_txn_marker({0, 0x01020304})), std::string("\0\0\1\2\3\4", 6));
  auto key = [](std::string_view s) { return decode_control_record_key(buf(s).span()); };
  auto marker = [](std::string_view s) { return decode_end_txn_marker(buf(s).span()); };
  EXPECT_EQ(key(std::string_view("\0\0\0", 3)).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(key(std::string_view("\xff\xff\0\1", 4)).status().code(), absl::StatusCode::kDataLoss);
  // A newer key version is read as version 0; the type need not be known.
  absl::StatusOr<ControlRecordKey> newer = key(std::string_view("\0\5\0\7xyz", 7));
  ASSERT_TRUE(newer.ok());
  EXPECT_EQ(newer->version, 5);
  EXPECT_EQ(static_cast<int16_t>(newer->type), 7);
  EXPECT_EQ(marker(std::string_view("\0\0\0\0\0", 5)).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(marker(std::string_view("\x80\0\0\0\0\0", 6)).status().code(),
            absl::StatusCode::kDataLoss);
  absl::StatusOr<EndTxnMarker> m = marker(std::string_view("\0\1\xff\xff\xff\xfe", 6));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->coordinator_epoch, -2);
}

// Arbitrary bytes give batches or errors, never crashes or huge allocations.
RC_GTEST_PROP(RecordBatch, RandomBytesNeverCrash, (const std::string& tail)) {
  // Half the time behind a plausible header, so the record parser is reached.
  const bool framed = *rc::gen::arbitrary<bool>();
  const auto count = *rc::gen::inRange<int32_t>(-2, 50);
  const auto attributes = *rc::gen::inRange<int16_t>(0, 8);
  std::vector<uint8_t> payload(tail.begin(), tail.end());
  const io::Buffer input = framed ? batch_with_payload(payload, count, attributes) : buf(tail);
  BatchIterator it(input);
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<std::optional<BatchView>> next = it.next();
    if (!next.ok() || !next->has_value()) break;
    (void)decode_records((*next)->bytes, 1 << 16);
  }
  (void)decode_records(input, 1 << 16);
}

// visit_records reads exactly what decode_records reads: the same status on
// any bytes (valid records, records with one byte changed, random payloads),
// and on success one summary per record with the decoded record's fields.
RC_GTEST_PROP(RecordBatch, VisitRecordsAgreesWithDecodeRecords, ()) {
  io::Buffer input;
  if (*rc::gen::arbitrary<bool>()) {
    RecordBatchOptions o;
    o.compression = *rc::gen::elementOf(std::vector<Compression>(kAllCodecs.begin(),
                                                                 kAllCodecs.end()));
    RecordBatchBuilder builder(o);
    const auto n = *rc::gen::inRange(1, 8);
    for (int i = 0; i < n; ++i) {
      NewRecord r;
      r.timestamp_ms = *rc::gen::inRange<int64_t>(0, 1000);
      if (*rc::gen::arbitrary<bool>()) r.key = buf(*rc::gen::arbitrary<std::string>());
      if (*rc::gen::arbitrary<bool>()) r.value = buf(*rc::gen::arbitrary<std::string>());
      if (*rc::gen::arbitrary<bool>()) r.headers.push_back({"h", buf("v")});
      builder.append(r);
    }
    absl::StatusOr<io::Buffer> batch = builder.build();
    RC_ASSERT(batch.ok());
    std::string bytes(batch->view());
    if (*rc::gen::arbitrary<bool>()) {
      const auto at = *rc::gen::inRange<size_t>(kBatchHeaderBytes, bytes.size());
      bytes[at] = static_cast<char>(*rc::gen::arbitrary<uint8_t>());
    }
    input = buf(bytes);
  } else {
    const auto tail = *rc::gen::arbitrary<std::vector<uint8_t>>();
    input = batch_with_payload(tail, *rc::gen::inRange<int32_t>(0, 6),
                               *rc::gen::inRange<int16_t>(0, 5));
  }
  const absl::StatusOr<std::vector<Record>> decoded = decode_records(input, 1 << 16);
  std::vector<RecordSummary> visited;
  const absl::Status status = visit_records(input, 1 << 16, [&](const RecordSummary& r) {
    visited.push_back(r);
    return true;
  });
  RC_ASSERT(status == decoded.status());
  if (!decoded.ok()) return;
  RC_ASSERT(visited.size() == decoded->size());
  for (size_t i = 0; i < visited.size(); ++i) {
    const Record& r = (*decoded)[i];
    RC_ASSERT(visited[i].attributes == r.attributes);
    RC_ASSERT(visited[i].timestamp_delta == r.timestamp_delta);
    RC_ASSERT(visited[i].offset_delta == r.offset_delta);
    RC_ASSERT(visited[i].has_key == r.key.has_value());
  }
}

// A visitor that returns false ends the walk at that record.
TEST(RecordBatch, VisitRecordsStopsWhenAsked) {
  RecordBatchBuilder builder(RecordBatchOptions{});
  NewRecord record;
  record.value = buf("v");
  for (int i = 0; i < 5; ++i) builder.append(record);
  absl::StatusOr<io::Buffer> batch = builder.build();
  ASSERT_TRUE(batch.ok());
  int seen = 0;
  EXPECT_TRUE(visit_records(*batch, kCap, [&](const RecordSummary&) { return ++seen < 2; }).ok());
  EXPECT_EQ(seen, 2);
}

}  // namespace
}  // namespace brook::net
