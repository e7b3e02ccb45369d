// net/kafka/message_set_test.cc
#include "net/kafka/message_set.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "net/codec/compression.h"
#include "net/codec/endian.h"
#include "net/kafka/record_batch.h"

namespace brook::net {
namespace {

constexpr size_t kCap = 1 << 20;

std::optional<io::Buffer> bytes(std::string_view s) { return io::Buffer::copy_of(s); }

std::string text(const std::optional<io::Buffer>& b) {
  return b.has_value() ? std::string(reinterpret_cast<const char*>(b->data()), b->size()) : "<null>";
}

// The records of one v2 batch, as (key, value, timestamp).
struct Seen {
  std::string key;
  std::string value;
  int64_t timestamp;
  bool operator==(const Seen&) const = default;
};

std::vector<Seen> records_of(const io::Buffer& batch, RecordBatchHeader* header = nullptr) {
  BatchIterator it(batch);
  absl::StatusOr<std::optional<BatchView>> next = it.next();
  EXPECT_TRUE(next.ok() && next->has_value()) << next.status();
  if (!next.ok() || !next->has_value()) return {};
  if (header != nullptr) *header = (*next)->header;
  absl::StatusOr<std::vector<Record>> records = decode_records((*next)->bytes, kCap);
  EXPECT_TRUE(records.ok()) << records.status();
  std::vector<Seen> out;
  for (const Record& r : *records) out.push_back({text(r.key), text(r.value), record_timestamp((*next)->header, r)});
  EXPECT_FALSE(it.next()->has_value()) << "one batch";
  return out;
}

TEST(MessageSet, UncompressedMagic1MessagesBecomeOneBatch) {
  std::string set;
  append_message_set_entry(set, 0, 1, 0, 1000, bytes("k0"), bytes("v0"));
  append_message_set_entry(set, 1, 1, 0, 1001, std::nullopt, bytes("v1"));
  append_message_set_entry(set, 2, 1, 0, 1002, bytes("k2"), std::nullopt);
  absl::StatusOr<io::Buffer> batch = message_set_to_batch(io::Buffer::copy_of(set).span(), kCap);
  ASSERT_TRUE(batch.ok()) << batch.status();
  RecordBatchHeader h;
  const std::vector<Seen> seen = records_of(*batch, &h);
  EXPECT_EQ(seen, (std::vector<Seen>{{"k0", "v0", 1000}, {"<null>", "v1", 1001}, {"k2", "<null>", 1002}}));
  EXPECT_EQ(h.producer_id, kNoProducerId);
  EXPECT_EQ(h.compression(), codec::Compression::kNone);
  EXPECT_EQ(h.timestamp_type(), TimestampType::kCreateTime);
  EXPECT_TRUE(verify_crc(h, batch->span()).ok());
}

TEST(MessageSet, Magic0MessagesHaveNoTimestamp) {
  std::string set;
  append_message_set_entry(set, 0, 0, 0, 0, bytes("k"), bytes("v"));
  absl::StatusOr<io::Buffer> batch = message_set_to_batch(io::Buffer::copy_of(set).span(), kCap);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(records_of(*batch), (std::vector<Seen>{{"k", "v", kNoTimestamp}}));
}

// A wrapper message: the inner set compressed as its value, the offset of
// the last inner message (magic 1 inner offsets count from 0).
std::string wrapped(codec::Compression codec, int8_t magic, int8_t extra_attributes, int64_t wrapper_timestamp,
                    const std::string& inner) {
  absl::StatusOr<io::Buffer> compressed = codec::compress(codec, io::Buffer::copy_of(inner).span());
  EXPECT_TRUE(compressed.ok());
  std::string set;
  append_message_set_entry(set, 41, magic, static_cast<int8_t>(static_cast<int>(codec) | extra_attributes),
                           wrapper_timestamp, std::nullopt, *compressed);
  return set;
}

TEST(MessageSet, CompressedWrappersAreUnpackedAndTheCodecKept) {
  for (codec::Compression c : {codec::Compression::kGzip, codec::Compression::kSnappy, codec::Compression::kLz4}) {
    std::string inner;
    append_message_set_entry(inner, 0, 1, 0, 5, bytes("a"), bytes("1"));
    append_message_set_entry(inner, 1, 1, 0, 6, bytes("b"), bytes("2"));
    const std::string set = wrapped(c, 1, 0, 6, inner);
    absl::StatusOr<io::Buffer> batch = message_set_to_batch(io::Buffer::copy_of(set).span(), kCap);
    ASSERT_TRUE(batch.ok()) << codec::compression_name(c) << ": " << batch.status();
    RecordBatchHeader h;
    EXPECT_EQ(records_of(*batch, &h), (std::vector<Seen>{{"a", "1", 5}, {"b", "2", 6}}));
    EXPECT_EQ(h.compression(), c);
  }
}

TEST(MessageSet, ALogAppendTimeWrapperGivesItsTimestampToEveryMessage) {
  std::string inner;
  append_message_set_entry(inner, 0, 1, 0, 5, bytes("a"), bytes("1"));
  append_message_set_entry(inner, 1, 1, 0, 6, bytes("b"), bytes("2"));
  const std::string set = wrapped(codec::Compression::kGzip, 1, 1 << 3, 99, inner);
  absl::StatusOr<io::Buffer> batch = message_set_to_batch(io::Buffer::copy_of(set).span(), kCap);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(records_of(*batch), (std::vector<Seen>{{"a", "1", 99}, {"b", "2", 99}}));
}

TEST(MessageSet, MalformedSetsAreCorrupt) {
  std::string good;
  append_message_set_entry(good, 0, 1, 0, 1, bytes("k"), bytes("value"));
  auto convert = [](const std::string& s) { return message_set_to_batch(io::Buffer::copy_of(s).span(), kCap).status(); };
  ASSERT_TRUE(convert(good).ok());

  std::string bad_crc = good;
  bad_crc.back() = static_cast<char>(bad_crc.back() ^ 1);
  EXPECT_TRUE(absl::IsDataLoss(convert(bad_crc))) << convert(bad_crc);
  EXPECT_TRUE(absl::IsDataLoss(convert(good.substr(0, good.size() - 1))));  // a partial message
  EXPECT_TRUE(absl::IsDataLoss(convert(good + good.substr(0, 5))));        // a partial entry
  EXPECT_TRUE(absl::IsDataLoss(convert("")));

  std::string magic2;
  append_message_set_entry(magic2, 0, 1, 0, 1, bytes("k"), bytes("v"));
  magic2[kMessageSetLogOverhead + 4] = 2;  // (the CRC no longer matches either)
  EXPECT_TRUE(absl::IsDataLoss(convert(magic2)));

  std::string zstd;
  append_message_set_entry(zstd, 0, 1, 4, 1, std::nullopt, bytes("x"));
  EXPECT_TRUE(absl::IsDataLoss(convert(zstd)));

  // A value length past the message.
  std::string long_value;
  append_message_set_entry(long_value, 0, 0, 0, 0, std::nullopt, bytes("vv"));
  codec::store_be<int32_t>(reinterpret_cast<std::byte*>(long_value.data()) + long_value.size() - 6, 3);
  EXPECT_TRUE(absl::IsDataLoss(convert(long_value)));

  // Compressed inside compressed.
  std::string inner;
  append_message_set_entry(inner, 0, 1, 0, 1, bytes("a"), bytes("1"));
  const std::string nested = wrapped(codec::Compression::kGzip, 1, 0, 1, wrapped(codec::Compression::kGzip, 1, 0, 1, inner));
  EXPECT_TRUE(absl::IsDataLoss(convert(nested)));

  // Past the cap.
  std::string big;
  append_message_set_entry(big, 0, 1, 0, 1, std::nullopt, io::Buffer::copy_of(std::string(4096, 'x')));
  const std::string compressed = wrapped(codec::Compression::kGzip, 1, 0, 1, big);
  EXPECT_TRUE(absl::IsResourceExhausted(message_set_to_batch(io::Buffer::copy_of(compressed).span(), 1000).status()));
}

io::Buffer batch_of(int64_t base_offset, std::vector<std::pair<std::string, int64_t>> values,
                    RecordBatchOptions options = {}) {
  options.base_offset = base_offset;
  RecordBatchBuilder b(options);
  for (auto& [v, ts] : values) {
    NewRecord r;
    r.timestamp_ms = ts;
    r.key = io::Buffer::copy_of(std::string_view("key-" + v));
    r.value = io::Buffer::copy_of(std::string_view(v));
    r.headers.push_back(RecordHeader{"h", io::Buffer::copy_of(std::string_view("x"))});
    b.append(std::move(r));
  }
  absl::StatusOr<io::Buffer> out = b.build();
  EXPECT_TRUE(out.ok());
  return *out;
}

struct Entry {
  int64_t offset;
  int8_t magic;
  int8_t attributes;
  int64_t timestamp;
  std::string key;
  std::string value;
  bool operator==(const Entry&) const = default;
};

// Parses a message set of uncompressed messages by hand (the format as
// Kafka's old clients read it).
std::vector<Entry> entries_of(const io::Buffer& set) {
  std::vector<Entry> out;
  std::span<const std::byte> b = set.span();
  size_t pos = 0;
  while (pos < b.size()) {
    Entry e;
    e.offset = codec::load_be<int64_t>(b, pos);
    const auto size = static_cast<size_t>(codec::load_be<int32_t>(b, pos + 8));
    size_t at = pos + 12 + 4;
    e.magic = static_cast<int8_t>(b[at++]);
    e.attributes = static_cast<int8_t>(b[at++]);
    e.timestamp = kNoTimestamp;
    if (e.magic == 1) {
      e.timestamp = codec::load_be<int64_t>(b, at);
      at += 8;
    }
    for (std::string* field : {&e.key, &e.value}) {
      const int32_t n = codec::load_be<int32_t>(b, at);
      at += 4;
      *field = n < 0 ? "<null>" : std::string(reinterpret_cast<const char*>(b.data() + at), static_cast<size_t>(n));
      at += n < 0 ? 0 : static_cast<size_t>(n);
    }
    EXPECT_EQ(at, pos + 12 + size);
    pos += 12 + size;
    out.push_back(e);
  }
  return out;
}

TEST(MessageSet, BatchesBecomeMessagesOfTheAskedMagicFromTheFetchOffset) {
  RecordBatchOptions gzip;
  gzip.compression = codec::Compression::kGzip;
  std::string all;
  for (const io::Buffer& b : {batch_of(10, {{"a", 100}, {"b", 101}}), batch_of(12, {{"c", 102}, {"d", 103}}, gzip)}) {
    all += std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  // A commit marker after them, and a partial batch at the end.
  TxnMarkerBatch marker;
  marker.base_offset = 14;
  const io::Buffer m = build_txn_marker_batch(marker);
  all += std::string(reinterpret_cast<const char*>(m.data()), m.size());
  const io::Buffer tail = batch_of(15, {{"e", 104}});
  all += std::string(reinterpret_cast<const char*>(tail.data()), tail.size() - 3);
  const io::Buffer batches = io::Buffer::copy_of(std::string_view(all));

  absl::StatusOr<io::Buffer> v1 = batches_to_message_set(batches, 11, 1, kCap);
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(entries_of(*v1), (std::vector<Entry>{{11, 1, 0, 101, "key-b", "b"},
                                                 {12, 1, 0, 102, "key-c", "c"},
                                                 {13, 1, 0, 103, "key-d", "d"}}));
  // What comes out reads back in.
  absl::StatusOr<io::Buffer> again = message_set_to_batch(v1->span(), kCap);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(records_of(*again), (std::vector<Seen>{{"key-b", "b", 101}, {"key-c", "c", 102}, {"key-d", "d", 103}}));

  absl::StatusOr<io::Buffer> v0 = batches_to_message_set(batches, 0, 0, kCap);
  ASSERT_TRUE(v0.ok()) << v0.status();
  EXPECT_EQ(entries_of(*v0), (std::vector<Entry>{{10, 0, 0, kNoTimestamp, "key-a", "a"},
                                                 {11, 0, 0, kNoTimestamp, "key-b", "b"},
                                                 {12, 0, 0, kNoTimestamp, "key-c", "c"},
                                                 {13, 0, 0, kNoTimestamp, "key-d", "d"}}));
}

TEST(MessageSet, LogAppendTimeBatchesMarkTheirMessages) {
  RecordBatchOptions o;
  o.timestamp_type = TimestampType::kLogAppendTime;
  o.log_append_time_ms = 777;
  absl::StatusOr<io::Buffer> v1 = batches_to_message_set(batch_of(0, {{"a", 1}}, o), 0, 1, kCap);
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_EQ(entries_of(*v1), (std::vector<Entry>{{0, 1, 1 << 3, 777, "key-a", "a"}}));
}

}  // namespace
}  // namespace brook::net
