// storage/compaction_test.cc: log compaction over in-memory segments —
// latest-wins, KIP-534 delete horizons, transaction markers, empty batches
// kept for producer state, codecs, byte-for-byte copies — and properties
// against a model of what a consumer reads.
#include "storage/compaction.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace brook::storage {
namespace {

using codec::Compression;
using net::ControlRecordType;

constexpr size_t kCap = 1 << 20;
constexpr int64_t kRetentionMs = 1000;
constexpr int64_t kNowMs = 100000;

io::Buffer buf(std::string_view s) { return io::Buffer::copy_of(s); }
std::string str(const io::Buffer& b) { return std::string(b.view()); }

io::Buffer concat(const std::vector<io::Buffer>& parts) {
  io::BufferChain chain;
  for (const io::Buffer& b : parts) chain.append(b);
  return chain.linearize();
}

// --- building logs ---------------------------------------------------------------

struct Put {
  std::optional<std::string> key;
  std::optional<std::string> value;
  std::vector<net::RecordHeader> headers = {};
};

struct Spec {
  int64_t producer_id = net::kNoProducerId;
  int16_t producer_epoch = net::kNoProducerEpoch;
  int32_t base_sequence = net::kNoSequence;
  bool transactional = false;
  Compression compression = Compression::kNone;
  net::TimestampType timestamp_type = net::TimestampType::kCreateTime;
};

Spec txn(int64_t producer_id, int16_t epoch = 0) {
  return Spec{.producer_id = producer_id, .producer_epoch = epoch, .base_sequence = 0,
              .transactional = true};
}

// A log under construction: batches at consecutive offsets, record
// timestamps 10 ms apart.
class Log {
 public:
  int64_t append(const std::vector<Put>& puts, const Spec& spec = {}) {
    net::RecordBatchOptions o;
    o.base_offset = next_offset_;
    o.partition_leader_epoch = 3;
    o.producer_id = spec.producer_id;
    o.producer_epoch = spec.producer_epoch;
    o.base_sequence = spec.base_sequence;
    o.transactional = spec.transactional;
    o.compression = spec.compression;
    o.timestamp_type = spec.timestamp_type;
    o.log_append_time_ms = clock_ms_ + 5;
    net::RecordBatchBuilder builder(o);
    for (const Put& p : puts) {
      clock_ms_ += 10;
      builder.append(net::NewRecord{
          .timestamp_ms = clock_ms_,
          .key = p.key ? std::optional<io::Buffer>(buf(*p.key)) : std::nullopt,
          .value = p.value ? std::optional<io::Buffer>(buf(*p.value)) : std::nullopt,
          .headers = p.headers,
      });
    }
    absl::StatusOr<io::Buffer> batch = builder.build();
    EXPECT_TRUE(batch.ok()) << batch.status();
    return add(*std::move(batch), static_cast<int64_t>(puts.size()));
  }

  int64_t marker(ControlRecordType type, int64_t producer_id, int16_t epoch = 0) {
    clock_ms_ += 10;
    return add(net::build_txn_marker_batch({.type = type,
                                            .base_offset = next_offset_,
                                            .partition_leader_epoch = 3,
                                            .producer_id = producer_id,
                                            .producer_epoch = epoch,
                                            .coordinator_epoch = 1,
                                            .timestamp_ms = clock_ms_}),
               1);
  }

  // A KRaft control record (neither commit nor abort).
  int64_t leader_change() {
    net::RecordBatchOptions o;
    o.base_offset = next_offset_;
    o.control = true;
    net::RecordBatchBuilder builder(o);
    builder.append(net::NewRecord{
        .timestamp_ms = clock_ms_,
        .key = net::encode_control_record_key({0, ControlRecordType::kLeaderChange}),
        .value = buf("voters"),
        .headers = {},
    });
    absl::StatusOr<io::Buffer> batch = builder.build();
    EXPECT_TRUE(batch.ok()) << batch.status();
    return add(*std::move(batch), 1);
  }

  io::Buffer bytes() const { return concat(batches_); }
  const io::Buffer& batch(size_t i) const { return batches_.at(i); }
  size_t batch_count() const { return batches_.size(); }
  int64_t end_offset() const { return next_offset_; }

 private:
  int64_t add(io::Buffer batch, int64_t count) {
    const int64_t base = next_offset_;
    next_offset_ += std::max<int64_t>(count, 1);
    batches_.push_back(std::move(batch));
    return base;
  }

  std::vector<io::Buffer> batches_;
  int64_t next_offset_ = 0;
  int64_t clock_ms_ = 1000;
};

// --- reading logs ----------------------------------------------------------------

struct Batch {
  net::RecordBatchHeader header;
  std::vector<net::Record> records;
  io::Buffer bytes;
};

// Every batch, CRC-checked twice (the iterator and verify_crc) and decoded.
absl::StatusOr<std::vector<Batch>> parse(const io::Buffer& log) {
  std::vector<Batch> out;
  net::BatchIterator it(log, {.crc = net::CrcCheck::kVerify,
                              .partial = net::PartialBatch::kReject});
  while (true) {
    absl::StatusOr<std::optional<net::BatchView>> next = it.next();
    if (!next.ok()) return next.status();
    if (!next->has_value()) return out;
    const net::BatchView& v = **next;
    if (absl::Status s = net::verify_crc(v.header, v.bytes.span()); !s.ok()) return s;
    absl::StatusOr<std::vector<net::Record>> records = net::decode_records(v.bytes, kCap);
    if (!records.ok()) return records.status();
    out.push_back(Batch{v.header, *std::move(records), v.bytes});
  }
}

std::vector<Batch> must_parse(const io::Buffer& log) {
  absl::StatusOr<std::vector<Batch>> batches = parse(log);
  EXPECT_TRUE(batches.ok()) << batches.status();
  return batches.ok() ? *std::move(batches) : std::vector<Batch>();
}

// A data record as a consumer sees it.
struct Rec {
  int64_t offset = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;
  bool operator==(const Rec&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Rec& r) {
  return os << r.offset << ":" << r.key.value_or("<null>") << "=" << r.value.value_or("<null>");
}

std::vector<Rec> data_records(const std::vector<Batch>& batches) {
  std::vector<Rec> out;
  for (const Batch& b : batches) {
    if (b.header.is_control()) continue;
    for (const net::Record& r : b.records) {
      out.push_back(Rec{net::record_offset(b.header, r),
                        r.key ? std::optional<std::string>(str(*r.key)) : std::nullopt,
                        r.value ? std::optional<std::string>(str(*r.value)) : std::nullopt});
    }
  }
  return out;
}

std::vector<Rec> records_of(const io::Buffer& log) { return data_records(must_parse(log)); }

std::vector<int64_t> offsets_of(const io::Buffer& log) {
  std::vector<int64_t> out;
  for (const Batch& b : must_parse(log)) {
    for (const net::Record& r : b.records) out.push_back(net::record_offset(b.header, r));
  }
  return out;
}

std::vector<int64_t> batch_last_offsets(const io::Buffer& log) {
  std::vector<int64_t> out;
  for (const Batch& b : must_parse(log)) out.push_back(b.header.last_offset());
  return out;
}

// --- cleaning ------------------------------------------------------------------------

// One pass over a one-segment log: the map over all of it, then the clean. The
// aborted list is the segment's transaction index, replaced by what the pass
// keeps.
struct Pass {
  int64_t now_ms = kNowMs;
  std::vector<AbortedTxnRange> aborted = {};
  ProducerLastRecords producers = {};
  std::optional<int64_t> round_end = std::nullopt;

  absl::StatusOr<CleanResult> run(const io::Buffer& log, int64_t end_offset) {
    OffsetMap map(kCap);
    TxnTracker map_txns;
    absl::StatusOr<BuildMapResult> built = build_offset_map(
        log, {.start_offset = 0, .end_offset = end_offset, .aborted = aborted}, map, map_txns);
    if (!built.ok()) return built.status();
    EXPECT_EQ(built->progress, MapProgress::kSegmentDone);
    TxnTracker txns;
    absl::StatusOr<CleanResult> result = clean_segment(log,
                                                       map,
                                                       {.current_time_ms = now_ms,
                                                        .delete_retention_ms = kRetentionMs,
                                                        .aborted = aborted,
                                                        .active_producers = producers,
                                                        .round_end_offset = round_end},
                                                       txns);
    if (result.ok()) aborted = result->aborted_retained;
    return result;
  }

  // The cleaned bytes (the test fails on an error).
  io::Buffer clean(const io::Buffer& log, int64_t end_offset) {
    absl::StatusOr<CleanResult> result = run(log, end_offset);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    EXPECT_TRUE(parse(result->bytes).ok());
    return result->bytes;
  }
};

// --- unit tests ----------------------------------------------------------------------

// The offset map keeps the largest offset per key within its byte budget.
TEST(OffsetMap, LatestOffsetWithinBudget) {
  const auto key = [](std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); };
  OffsetMap map(2 * (OffsetMap::kEntryOverheadBytes + 2));
  EXPECT_EQ(map.latest_offset(), -1);
  EXPECT_TRUE(map.put(key("k1"), 5));
  EXPECT_TRUE(map.put(key("k2"), 6));
  EXPECT_FALSE(map.put(key("k3"), 7));  // no room for a third key
  EXPECT_FALSE(map.get(key("k3")).has_value());
  EXPECT_EQ(map.latest_offset(), 6);
  EXPECT_TRUE(map.put(key("k1"), 9));  // updating a present key needs no room
  EXPECT_TRUE(map.put(key("k1"), 8));  // an older offset does not win
  EXPECT_EQ(map.get(key("k1")), 9);
  EXPECT_EQ(map.get(key("k2")), 6);
  EXPECT_EQ(map.size(), 2u);
  EXPECT_EQ(map.memory_bytes_used(), map.memory_bytes_max());
  map.update_latest_offset(4);
  EXPECT_EQ(map.latest_offset(), 9);
  map.clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.latest_offset(), -1);
  EXPECT_TRUE(map.put(key("k3"), 1));
}

// Only the latest record of each key survives; untouched batches are copied
// byte for byte and batches left without records disappear.
TEST(Compaction, LatestWins) {
  Log log;
  log.append({{"k1", "a"}, {"k2", "b"}});  // 0-1: both superseded
  log.append({{"k1", "c"}});               // 2: superseded
  log.append({{"k3", "d"}, {"k2", "e"}});  // 3-4
  log.append({{"k1", "f"}});               // 5
  Pass pass;
  absl::StatusOr<CleanResult> result = pass.run(log.bytes(), log.end_offset());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(records_of(result->bytes),
            (std::vector<Rec>{{3, "k3", "d"}, {4, "k2", "e"}, {5, "k1", "f"}}));
  EXPECT_EQ(result->bytes, concat({log.batch(2), log.batch(3)}));
  EXPECT_EQ(offsets_of(result->bytes), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(result->batches_read, 4);
  EXPECT_EQ(result->batches_kept, 2);
  EXPECT_EQ(result->records_read, 6);
  EXPECT_EQ(result->records_kept, 3);
  EXPECT_EQ(result->records_removed, 3);
  EXPECT_EQ(result->bytes_read, log.bytes().size());
  EXPECT_EQ(result->bytes_written, result->bytes.size());
  EXPECT_EQ(result->last_offset, 5);
}

// A partly cleaned batch keeps its base offset, last offset, the offset
// deltas, timestamps and headers of its survivors, and its producer fields.
TEST(Compaction, PartialBatchKeepsOffsetsTimestampsHeaders) {
  Log log;
  const std::vector<net::RecordHeader> headers = {{"h1", buf("x")}, {"h2", std::nullopt}};
  log.append({{"k1", "a", headers}, {"k2", "b"}, {"k3", "c", headers}, {"k4", "d"}},
             Spec{.producer_id = 4, .producer_epoch = 2, .base_sequence = 17});
  log.append({{"k2", "x"}, {"k4", "y"}});
  const std::vector<Batch> original = must_parse(log.bytes());
  Pass pass;
  const io::Buffer cleaned = pass.clean(log.bytes(), log.end_offset());
  const std::vector<Batch> batches = must_parse(cleaned);
  ASSERT_EQ(batches.size(), 2u);
  const net::RecordBatchHeader& h = batches[0].header;
  const net::RecordBatchHeader& o = original[0].header;
  EXPECT_EQ(h.base_offset, 0);
  EXPECT_EQ(h.last_offset_delta, 3);
  EXPECT_EQ(h.records_count, 2);
  EXPECT_EQ(h.producer_id, 4);
  EXPECT_EQ(h.producer_epoch, 2);
  EXPECT_EQ(h.base_sequence, 17);
  EXPECT_EQ(h.partition_leader_epoch, 3);
  EXPECT_EQ(h.attributes, o.attributes);
  ASSERT_EQ(batches[0].records.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const net::Record& r = batches[0].records[i];
    const net::Record& before = original[0].records[2 * i];
    EXPECT_EQ(r.offset_delta, before.offset_delta);
    EXPECT_EQ(net::record_timestamp(h, r), net::record_timestamp(o, before));
    EXPECT_EQ(r.headers, before.headers);
    EXPECT_EQ(r.key, before.key);
    EXPECT_EQ(r.value, before.value);
  }
  // maxTimestamp is that of the survivors (k4's record, the batch's newest, went).
  EXPECT_EQ(h.max_timestamp, net::record_timestamp(o, original[0].records[2]));
  EXPECT_EQ(batches[1].bytes, log.batch(1));
}

// Compressed batches are re-compressed with their own codec; a compressed
// batch left whole is copied as it was.
TEST(Compaction, CompressedBatchesKeepTheirCodec) {
  for (const Compression codec : {Compression::kGzip, Compression::kZstd, Compression::kLz4,
                                  Compression::kSnappy}) {
    SCOPED_TRACE(std::string(codec::compression_name(codec)));
    Log log;
    const std::string big(300, 'z');  // compressible
    log.append({{"k1", big}, {"k2", big}, {"k3", big}}, Spec{.compression = codec});
    log.append({{"k2", "new"}, {"k9", big}}, Spec{.compression = codec});
    Pass pass;
    const io::Buffer cleaned = pass.clean(log.bytes(), log.end_offset());
    const std::vector<Batch> batches = must_parse(cleaned);
    ASSERT_EQ(batches.size(), 2u);
    EXPECT_EQ(batches[0].header.compression(), codec);
    EXPECT_LT(batches[0].bytes.size(), 300u);  // still compressed
    EXPECT_EQ(records_of(cleaned), (std::vector<Rec>{{0, "k1", big},
                                                     {2, "k3", big},
                                                     {3, "k2", "new"},
                                                     {4, "k9", big}}));
    EXPECT_EQ(batches[0].header.last_offset(), 2);
    EXPECT_EQ(batches[1].bytes, log.batch(1));
  }
}

// A tombstone stays through the pass that finds it, which stamps its batch
// with the delete horizon, and through passes before the horizon; the first
// pass at or after the horizon removes it.
TEST(Compaction, TombstonesLiveUntilTheDeleteHorizon) {
  Log log;
  log.append({{"k1", "a"}});
  log.append({{"k1", std::nullopt}, {"k2", "b"}});
  const std::vector<Batch> original = must_parse(log.bytes());
  Pass pass;
  const io::Buffer first = pass.clean(log.bytes(), log.end_offset());
  std::vector<Batch> batches = must_parse(first);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_TRUE(batches[0].header.has_delete_horizon());
  EXPECT_EQ(batches[0].header.base_timestamp, kNowMs + kRetentionMs);
  EXPECT_EQ(batches[0].header.max_timestamp, original[1].header.max_timestamp);
  ASSERT_EQ(batches[0].records.size(), 2u);
  EXPECT_EQ(net::record_timestamp(batches[0].header, batches[0].records[0]),
            net::record_timestamp(original[1].header, original[1].records[0]));
  EXPECT_EQ(records_of(first), (std::vector<Rec>{{1, "k1", std::nullopt}, {2, "k2", "b"}}));

  pass.now_ms = kNowMs + kRetentionMs - 1;
  const io::Buffer second = pass.clean(first, log.end_offset());
  EXPECT_EQ(second, first);  // horizon already set: copied as is

  pass.now_ms = kNowMs + kRetentionMs;
  const io::Buffer third = pass.clean(second, log.end_offset());
  EXPECT_EQ(records_of(third), (std::vector<Rec>{{2, "k2", "b"}}));
  batches = must_parse(third);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].header.last_offset(), 2);
  EXPECT_TRUE(batches[0].header.has_delete_horizon());  // kept as it was set
}

// Aborted data never enters the offset map and is removed; its abort marker
// stays while the pass sees its data, then gets a delete horizon, and goes
// once the horizon passes.
TEST(Compaction, AbortedDataAndItsMarker) {
  Log log;
  log.append({{"k1", "committed"}});                 // 0
  log.append({{"k1", "aborted"}}, txn(7));           // 1
  log.append({{"k2", "aborted"}}, txn(7));           // 2
  log.marker(ControlRecordType::kAbort, 7);          // 3
  log.append({{"k3", "c"}});                         // 4
  const std::vector<AbortedTxnRange> index = {{.producer_id = 7, .first_offset = 1,
                                               .last_offset = 3, .last_stable_offset = 1}};
  OffsetMap map(kCap);
  TxnTracker map_txns;
  ASSERT_TRUE(build_offset_map(log.bytes(), {.start_offset = 0, .end_offset = 5,
                                             .aborted = index},
                               map, map_txns)
                  .ok());
  EXPECT_EQ(map.get(std::as_bytes(std::span("k1", 2))), 0);
  EXPECT_FALSE(map.get(std::as_bytes(std::span("k2", 2))).has_value());
  EXPECT_EQ(map.latest_offset(), 4);

  Pass pass{.aborted = index};
  absl::StatusOr<CleanResult> first = pass.run(log.bytes(), log.end_offset());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(records_of(first->bytes), (std::vector<Rec>{{0, "k1", "committed"}, {4, "k3", "c"}}));
  EXPECT_EQ(first->aborted_retained, index);  // the marker kept its data's entry
  const std::vector<Batch> kept = must_parse(first->bytes);
  ASSERT_EQ(batch_last_offsets(first->bytes), (std::vector<int64_t>{0, 3, 4}));
  EXPECT_FALSE(kept[1].header.has_delete_horizon());

  const io::Buffer second = pass.clean(first->bytes, log.end_offset());
  EXPECT_TRUE(pass.aborted.empty());  // no data left: no index entry
  std::vector<Batch> batches = must_parse(second);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_TRUE(batches[1].header.is_control());
  EXPECT_TRUE(batches[1].header.has_delete_horizon());
  EXPECT_EQ(batches[1].header.base_timestamp, kNowMs + kRetentionMs);
  EXPECT_EQ(batches[1].records.size(), 1u);

  pass.now_ms = kNowMs + kRetentionMs - 1;
  EXPECT_EQ(pass.clean(second, log.end_offset()), second);
  pass.now_ms = kNowMs + kRetentionMs;
  EXPECT_EQ(batch_last_offsets(pass.clean(second, log.end_offset())),
            (std::vector<int64_t>{0, 4}));
}

// A commit marker stays while any batch of its transaction does; once the
// data is gone it gets a horizon, and goes after it.
TEST(Compaction, CommitMarkers) {
  Log log;
  log.append({{"k1", "a"}}, txn(7));       // 0: superseded below
  log.append({{"k2", "b"}}, txn(7));       // 1: superseded below
  log.marker(ControlRecordType::kCommit, 7);  // 2
  log.append({{"k3", "c"}}, txn(8));       // 3: survives
  log.marker(ControlRecordType::kCommit, 8);  // 4
  log.append({{"k1", "x"}, {"k2", "y"}});  // 5-6
  Pass pass{.now_ms = kNowMs};
  const io::Buffer first = pass.clean(log.bytes(), log.end_offset());
  EXPECT_EQ(batch_last_offsets(first), (std::vector<int64_t>{2, 3, 4, 6}));
  for (const Batch& b : must_parse(first)) EXPECT_FALSE(b.header.has_delete_horizon());

  const io::Buffer second = pass.clean(first, log.end_offset());
  std::vector<Batch> batches = must_parse(second);
  ASSERT_EQ(batches.size(), 4u);
  EXPECT_TRUE(batches[0].header.has_delete_horizon());   // pid 7's marker: no data left
  EXPECT_FALSE(batches[2].header.has_delete_horizon());  // pid 8's: its data remains

  pass.now_ms = kNowMs + 100 * kRetentionMs;
  const io::Buffer third = pass.clean(second, log.end_offset());
  EXPECT_EQ(batch_last_offsets(third), (std::vector<int64_t>{3, 4, 6}));
  EXPECT_EQ(pass.clean(third, log.end_offset()), third);  // nothing more to remove
}

// A batch of an idempotent producer that holds its last sequence stays, as an
// empty batch, when its records go; others are removed.
TEST(Compaction, EmptyBatchKeepsProducerState) {
  Log log;
  log.append({{"k1", "a"}, {"k2", "b"}},
             Spec{.producer_id = 5, .producer_epoch = 2, .base_sequence = 40});  // 0-1
  log.append({{"k3", "c"}}, Spec{.producer_id = 6, .producer_epoch = 0, .base_sequence = 0});
  log.append({{"k1", "x"}, {"k2", "y"}, {"k3", "z"}});  // 3-5
  ProducerLastRecords producers;
  ASSERT_TRUE(scan_producer_last_records(log.bytes(), producers).ok());
  EXPECT_EQ(producers, (ProducerLastRecords{{5, {1, 2}}, {6, {2, 0}}}));
  const net::RecordBatchHeader before = must_parse(log.bytes())[0].header;

  Pass pass{.producers = producers};
  const io::Buffer cleaned = pass.clean(log.bytes(), log.end_offset());
  std::vector<Batch> batches = must_parse(cleaned);
  ASSERT_EQ(batches.size(), 3u);
  const net::RecordBatchHeader& h = batches[0].header;
  EXPECT_EQ(h.records_count, 0);
  EXPECT_EQ(h.batch_length, net::kBatchLengthMin);
  EXPECT_EQ(h.base_offset, 0);
  EXPECT_EQ(h.last_offset_delta, 1);
  EXPECT_EQ(h.producer_id, 5);
  EXPECT_EQ(h.producer_epoch, 2);
  EXPECT_EQ(h.base_sequence, 40);
  EXPECT_EQ(h.partition_leader_epoch, 3);
  EXPECT_EQ(h.base_timestamp, net::kNoTimestamp);
  EXPECT_EQ(h.max_timestamp, before.max_timestamp);
  EXPECT_EQ(batches[1].records.size(), 0u);
  EXPECT_EQ(batches[1].header.producer_id, 6);
  EXPECT_EQ(records_of(cleaned), records_of(concat({log.batch(2)})));
  // Cleaning again keeps the empty batches as they are.
  EXPECT_EQ(pass.clean(cleaned, log.end_offset()), cleaned);

  // Without the producer state they are not needed.
  Pass stateless;
  EXPECT_EQ(batch_last_offsets(stateless.clean(log.bytes(), log.end_offset())),
            (std::vector<int64_t>{5}));
}

// A producer whose last entry is a marker that bumped its epoch keeps that
// marker, emptied once removable, for the epoch (Kafka's empty control batch).
TEST(Compaction, MarkerHoldingTheEpochStaysEmpty) {
  Log log;
  log.append({{"k1", "a"}}, txn(7, 0));          // 0
  log.marker(ControlRecordType::kAbort, 7, 1);  // 1: epoch bump
  log.append({{"k2", "b"}});                     // 2
  ProducerLastRecords producers;
  ASSERT_TRUE(scan_producer_last_records(log.bytes(), producers).ok());
  EXPECT_EQ(producers, (ProducerLastRecords{{7, {std::nullopt, 1}}}));
  Pass pass{.aborted = {{.producer_id = 7, .first_offset = 0, .last_offset = 1}},
            .producers = producers};
  io::Buffer cleaned = pass.clean(log.bytes(), log.end_offset());  // data goes
  cleaned = pass.clean(cleaned, log.end_offset());                 // horizon set
  pass.now_ms += 2 * kRetentionMs;
  cleaned = pass.clean(cleaned, log.end_offset());                 // records go
  std::vector<Batch> batches = must_parse(cleaned);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_TRUE(batches[0].header.is_control());
  EXPECT_EQ(batches[0].header.producer_epoch, 1);
  EXPECT_EQ(batches[0].records.size(), 0u);
  pass.now_ms += 2 * kRetentionMs;
  EXPECT_EQ(pass.clean(cleaned, log.end_offset()), cleaned);
}

// The batch that ends the cleaning round stays even when it has no records
// left, so the segment keeps its last offset.
TEST(Compaction, LastBatchOfTheRoundStays) {
  Log log;
  log.append({{"k1", "a"}});
  log.append({{std::nullopt, "unkeyed"}});
  Pass keep{.round_end = log.end_offset()};
  std::vector<Batch> batches = must_parse(keep.clean(log.bytes(), log.end_offset()));
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1].header.base_offset, 1);
  EXPECT_EQ(batches[1].records.size(), 0u);
  Pass drop;
  EXPECT_EQ(batch_last_offsets(drop.clean(log.bytes(), log.end_offset())),
            (std::vector<int64_t>{0}));
}

// Records without a key are dropped, except past the offsets the map covers.
TEST(Compaction, NullKeysAndRecordsPastTheMap) {
  Log log;
  log.append({{std::nullopt, "n0"}, {"k1", "a"}});  // 0-1
  log.append({{"k1", "b"}});                        // 2
  log.append({{std::nullopt, "n3"}});               // 3
  OffsetMap map(kCap);
  TxnTracker map_txns;
  // The map covers [0, 2) only: offsets 2 and 3 are a later round's.
  absl::StatusOr<BuildMapResult> built =
      build_offset_map(log.bytes(), {.start_offset = 0, .end_offset = 2}, map, map_txns);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->records_read, 2);
  EXPECT_EQ(map.latest_offset(), 1);
  TxnTracker txns;
  absl::StatusOr<CleanResult> result =
      clean_segment(log.bytes(), map, {.current_time_ms = kNowMs}, txns);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(records_of(result->bytes),
            (std::vector<Rec>{{1, "k1", "a"}, {2, "k1", "b"}, {3, std::nullopt, "n3"}}));
  Pass pass;
  EXPECT_EQ(records_of(pass.clean(log.bytes(), log.end_offset())),
            (std::vector<Rec>{{2, "k1", "b"}}));
}

// A full map stops the pass after the last key it took; the round cleans up
// to there and leaves later records for the next round.
TEST(Compaction, FullMapEndsTheRound) {
  Log log;
  log.append({{"k0", "a"}, {"k1", "a"}});
  log.append({{"k0", "b"}, {"k2", "b"}, {"k3", "b"}});  // 2-4: k3 does not fit
  log.append({{"k0", "c"}});
  OffsetMap map(3 * (OffsetMap::kEntryOverheadBytes + 2));
  TxnTracker map_txns;
  absl::StatusOr<BuildMapResult> built =
      build_offset_map(log.bytes(), {.start_offset = 0, .end_offset = 6}, map, map_txns);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->progress, MapProgress::kMapFull);
  EXPECT_EQ(map.latest_offset(), 3);
  EXPECT_EQ(map.size(), 3u);
  TxnTracker txns;
  absl::StatusOr<CleanResult> round =
      clean_segment(log.bytes(), map, {.current_time_ms = kNowMs}, txns);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(records_of(round->bytes), (std::vector<Rec>{{1, "k1", "a"},
                                                        {2, "k0", "b"},
                                                        {3, "k2", "b"},
                                                        {4, "k3", "b"},
                                                        {5, "k0", "c"}}));
  // The next round starts at offset 4.
  map.clear();
  TxnTracker next_txns;
  built = build_offset_map(round->bytes, {.start_offset = 4, .end_offset = 6}, map, next_txns);
  ASSERT_TRUE(built.ok());
  EXPECT_EQ(built->progress, MapProgress::kSegmentDone);
  TxnTracker clean_txns;
  round = clean_segment(round->bytes, map, {.current_time_ms = kNowMs}, clean_txns);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(records_of(round->bytes),
            (std::vector<Rec>{{1, "k1", "a"}, {3, "k2", "b"}, {4, "k3", "b"}, {5, "k0", "c"}}));
}

// A key larger than the whole map can never be cleaned: an error, not a loop.
TEST(Compaction, KeyLargerThanTheMap) {
  Log log;
  log.append({{std::string(100, 'k'), "a"}});
  OffsetMap map(OffsetMap::kEntryOverheadBytes + 10);
  TxnTracker txns;
  absl::StatusOr<BuildMapResult> built =
      build_offset_map(log.bytes(), {.start_offset = 0, .end_offset = 1}, map, txns);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kResourceExhausted);
}

// Corrupt or cut segments are errors, never crashes.
TEST(Compaction, CorruptSegments) {
  Log log;
  log.append({{"k1", "a"}});
  log.append({{"k1", "b"}});
  const io::Buffer good = log.bytes();
  io::Buffer flipped = io::Buffer::copy_of(good.span());
  flipped.mutable_data()[good.size() - 2] ^= std::byte{0x40};
  const io::Buffer cut = good.slice(0, good.size() - 3);
  for (const io::Buffer& bad : {flipped, cut}) {
    OffsetMap map(kCap);
    TxnTracker a;
    EXPECT_FALSE(build_offset_map(bad, {.start_offset = 0, .end_offset = 2}, map, a).ok());
    TxnTracker b;
    EXPECT_FALSE(clean_segment(bad, map, {.current_time_ms = kNowMs}, b).ok());
  }
  // Batches out of offset order.
  const io::Buffer swapped = concat({log.batch(1), log.batch(0)});
  OffsetMap map(kCap);
  TxnTracker txns;
  EXPECT_EQ(clean_segment(swapped, map, {.current_time_ms = kNowMs}, txns).status().code(),
            absl::StatusCode::kDataLoss);
}

// Control records other than commit and abort (KRaft) are never removed.
TEST(Compaction, OtherControlRecordsStay) {
  Log log;
  log.leader_change();
  log.append({{"k1", "a"}});
  Pass pass{.now_ms = kNowMs};
  io::Buffer cleaned = pass.clean(log.bytes(), log.end_offset());
  pass.now_ms += 10 * kRetentionMs;
  cleaned = pass.clean(cleaned, log.end_offset());
  EXPECT_EQ(cleaned, log.bytes());
}

// The largest timestamp kept and the last offset of its batch feed the time
// index; the first batch carrying the maximum names it.
TEST(Compaction, MaxTimestampForTheTimeIndex) {
  Log log;
  log.append({{"k1", "a"}, {"k2", "a"}});  // 0-1, timestamps 1010, 1020
  log.append({{"k3", "a"}});               // 2, 1030
  log.append({{"k2", "b"}});               // 3, 1040
  Pass pass;
  absl::StatusOr<CleanResult> result = pass.run(log.bytes(), log.end_offset());
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->max_timestamp_ms, 1040);
  EXPECT_EQ(result->offset_of_max_timestamp, 3);
  // Without the newest batch, the rebuilt first batch's maximum is k1's.
  Log only_first;
  only_first.append({{"k1", "a"}, {"k2", "a"}, {"k2", "b"}});
  absl::StatusOr<CleanResult> partial = pass.run(only_first.bytes(), only_first.end_offset());
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->max_timestamp_ms, 1030);
  EXPECT_EQ(partial->offset_of_max_timestamp, 2);
  EXPECT_EQ(records_of(partial->bytes), (std::vector<Rec>{{0, "k1", "a"}, {2, "k2", "b"}}));
}

// LogAppendTime batches keep their append time through a rebuild.
TEST(Compaction, LogAppendTimeSurvivesRebuild) {
  Log log;
  log.append({{"k1", "a"}, {"k2", "a"}},
             Spec{.timestamp_type = net::TimestampType::kLogAppendTime});
  log.append({{"k1", "b"}});
  const int64_t append_ms = must_parse(log.bytes())[0].header.max_timestamp;
  Pass pass;
  const std::vector<Batch> batches = must_parse(pass.clean(log.bytes(), log.end_offset()));
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].header.timestamp_type(), net::TimestampType::kLogAppendTime);
  EXPECT_EQ(batches[0].header.max_timestamp, append_ms);
  ASSERT_EQ(batches[0].records.size(), 1u);
  EXPECT_EQ(net::record_timestamp(batches[0].header, batches[0].records[0]), append_ms);
}

// A transaction across two segments: the tracker carried from the first
// segment keeps the second segment's abort marker (and its index entry) while
// the first keeps an empty batch of the aborted transaction.
TEST(Compaction, TransactionAcrossSegments) {
  Log whole;
  whole.append({{"k1", "aborted"}}, txn(7));  // 0: the producer's last data
  whole.marker(ControlRecordType::kAbort, 7);  // 1
  whole.append({{"k2", "v"}});                 // 2
  const io::Buffer segment_a = whole.batch(0);
  const io::Buffer segment_b = concat({whole.batch(1), whole.batch(2)});
  const std::vector<AbortedTxnRange> index = {{.producer_id = 7, .first_offset = 0,
                                               .last_offset = 1}};
  ProducerLastRecords producers;
  ASSERT_TRUE(scan_producer_last_records(whole.bytes(), producers).ok());

  OffsetMap map(kCap);
  TxnTracker map_txns;
  ASSERT_TRUE(build_offset_map(segment_a, {.start_offset = 0, .end_offset = 1, .aborted = index},
                               map, map_txns)
                  .ok());
  ASSERT_TRUE(build_offset_map(segment_b, {.start_offset = 0, .end_offset = 3, .aborted = index},
                               map, map_txns)
                  .ok());
  EXPECT_EQ(map.size(), 1u);  // only k2
  const CleanOptions options{.current_time_ms = kNowMs,
                             .delete_retention_ms = kRetentionMs,
                             .aborted = index,
                             .active_producers = producers};
  TxnTracker txns;
  absl::StatusOr<CleanResult> ra = clean_segment(segment_a, map, options, txns);
  absl::StatusOr<CleanResult> rb = clean_segment(segment_b, map, options, txns);
  ASSERT_TRUE(ra.ok() && rb.ok());
  const std::vector<Batch> kept_a = must_parse(ra->bytes);
  ASSERT_EQ(kept_a.size(), 1u);
  EXPECT_EQ(kept_a[0].header.last_offset(), 0);
  EXPECT_EQ(kept_a[0].records.size(), 0u);
  EXPECT_TRUE(ra->aborted_retained.empty());
  EXPECT_EQ(batch_last_offsets(rb->bytes), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(rb->aborted_retained, index);
  // A tracker that did not see the first segment would let the marker go.
  TxnTracker fresh;
  absl::StatusOr<CleanResult> alone = clean_segment(segment_b, map, options, fresh);
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE(alone->aborted_retained.empty());
}

// An aborted range handed again for a later segment (after its marker) does
// not taint the producer's next, committed transaction.
TEST(Compaction, AbortedRangeGivenAgainAfterItsMarker) {
  Log log;
  log.append({{"k1", "x"}}, txn(7));          // 0: aborted
  log.marker(ControlRecordType::kAbort, 7);  // 1
  log.append({{"k2", "y"}}, txn(7));          // 2: committed
  log.marker(ControlRecordType::kCommit, 7);  // 3
  const io::Buffer segment_a = concat({log.batch(0), log.batch(1)});
  const io::Buffer segment_b = concat({log.batch(2), log.batch(3)});
  const std::vector<AbortedTxnRange> index = {{.producer_id = 7, .first_offset = 0,
                                               .last_offset = 1}};
  OffsetMap map(kCap);
  TxnTracker map_txns;
  ASSERT_TRUE(build_offset_map(segment_a, {.start_offset = 0, .end_offset = 2, .aborted = index},
                               map, map_txns)
                  .ok());
  ASSERT_TRUE(build_offset_map(segment_b, {.start_offset = 0, .end_offset = 4, .aborted = index},
                               map, map_txns)
                  .ok());
  EXPECT_EQ(map.get(std::as_bytes(std::span("k2", 2))), 2);
  const CleanOptions options{.current_time_ms = kNowMs, .aborted = index};
  TxnTracker txns;
  ASSERT_TRUE(clean_segment(segment_a, map, options, txns).ok());
  absl::StatusOr<CleanResult> rb = clean_segment(segment_b, map, options, txns);
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(records_of(rb->bytes), (std::vector<Rec>{{2, "k2", "y"}}));
}

// --- properties against a model ---------------------------------------------------------

constexpr int kKeys = 6;
constexpr int64_t kIdempotentProducers[] = {1, 2};
constexpr int64_t kTxnProducers[] = {10, 11};

struct ModelRecord {
  int64_t offset = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;
  int txn = -1;  // index into GeneratedLog::txns, -1 outside transactions
};

struct ModelTxn {
  int64_t producer_id = 0;
  int64_t first_offset = 0;
  int64_t marker_offset = -1;
  bool aborted = false;
};

struct GeneratedLog {
  Log log;
  std::vector<ModelRecord> records;
  std::vector<ModelTxn> txns;
  // Which transaction each batch belongs to (by base offset), -1 for none.
  std::map<int64_t, int> batch_txn;
  // Segment boundaries: base offsets, the first 0.
  std::vector<int64_t> segment_bases;
  std::vector<size_t> segment_first_batch;

  std::vector<AbortedTxnRange> aborted() const {
    std::vector<AbortedTxnRange> out;
    for (const ModelTxn& t : txns) {
      if (t.aborted) out.push_back({t.producer_id, t.first_offset, t.marker_offset, -1});
    }
    return out;
  }
};

struct TxnProducerState {
  int16_t epoch = 0;
  int open = -1;  // open transaction index
  int32_t sequence = 0;
};

std::vector<Put> gen_puts(int max_records, bool allow_null_keys) {
  const int n = *rc::gen::inRange(1, max_records + 1);
  std::vector<Put> puts;
  for (int i = 0; i < n; ++i) {
    Put p;
    if (!allow_null_keys || *rc::gen::inRange(0, 12) != 0) {
      p.key = fmt::format("k{}", *rc::gen::inRange(0, kKeys));
    }
    if (*rc::gen::inRange(0, 4) != 0) p.value = fmt::format("v{}", *rc::gen::inRange(0, 1000));
    puts.push_back(std::move(p));
  }
  return puts;
}

Spec gen_format(Spec spec) {
  spec.compression = *rc::gen::element(Compression::kNone, Compression::kNone, Compression::kGzip,
                                       Compression::kZstd);
  if (*rc::gen::inRange(0, 8) == 0) spec.timestamp_type = net::TimestampType::kLogAppendTime;
  return spec;
}

void add_model_records(GeneratedLog& g, int64_t base, const std::vector<Put>& puts, int txn) {
  for (size_t i = 0; i < puts.size(); ++i) {
    g.records.push_back({base + static_cast<int64_t>(i), puts[i].key, puts[i].value, txn});
  }
  g.batch_txn[base] = txn;
}

void end_txn(GeneratedLog& g, int64_t pid, TxnProducerState& p, bool abort, bool bump) {
  ModelTxn& t = g.txns[static_cast<size_t>(p.open)];
  if (bump) p.epoch = static_cast<int16_t>(p.epoch + 1);
  t.aborted = abort;
  t.marker_offset = g.log.marker(abort ? ControlRecordType::kAbort : ControlRecordType::kCommit,
                                 pid, p.epoch);
  g.batch_txn[t.marker_offset] = p.open;
  p.open = -1;
}

// One step: a plain batch, an idempotent batch, a transactional batch, or the
// end of an open transaction.
void gen_step(GeneratedLog& g, std::map<int64_t, TxnProducerState>& txn_producers,
              std::map<int64_t, int32_t>& sequences) {
  const int kind = *rc::gen::inRange(0, 5);
  if (kind <= 1) {
    Spec spec;
    if (kind == 1) {
      spec.producer_id = *rc::gen::elementOf(std::vector<int64_t>(
          std::begin(kIdempotentProducers), std::end(kIdempotentProducers)));
      spec.producer_epoch = 0;
      spec.base_sequence = sequences[spec.producer_id];
    }
    const std::vector<Put> puts = gen_puts(4, true);
    if (kind == 1) sequences[spec.producer_id] += static_cast<int32_t>(puts.size());
    add_model_records(g, g.log.append(puts, gen_format(spec)), puts, -1);
    return;
  }
  const int64_t pid = *rc::gen::elementOf(
      std::vector<int64_t>(std::begin(kTxnProducers), std::end(kTxnProducers)));
  TxnProducerState& p = txn_producers[pid];
  if (kind == 4 && p.open >= 0) {
    end_txn(g, pid, p, *rc::gen::arbitrary<bool>(), *rc::gen::inRange(0, 4) == 0);
    return;
  }
  const std::vector<Put> puts = gen_puts(3, false);
  const int64_t base = g.log.end_offset();
  if (p.open < 0) {
    p.open = static_cast<int>(g.txns.size());
    g.txns.push_back({pid, base, -1, false});
  }
  Spec spec = txn(pid, p.epoch);
  spec.base_sequence = p.sequence;
  p.sequence += static_cast<int32_t>(puts.size());
  add_model_records(g, g.log.append(puts, gen_format(spec)), puts, p.open);
}

GeneratedLog gen_log() {
  GeneratedLog g;
  std::map<int64_t, TxnProducerState> txn_producers;
  std::map<int64_t, int32_t> sequences;
  const int steps = *rc::gen::inRange(1, 30);
  for (int i = 0; i < steps; ++i) gen_step(g, txn_producers, sequences);
  for (auto& [pid, p] : txn_producers) {
    if (p.open >= 0) end_txn(g, pid, p, *rc::gen::arbitrary<bool>(), false);
  }
  // Up to two extra segment boundaries, at batch boundaries.
  std::set<size_t> cuts = {0};
  const int extra = *rc::gen::inRange(0, 3);
  for (int i = 0; i < extra; ++i) {
    cuts.insert(*rc::gen::inRange<size_t>(0, g.log.batch_count()));
  }
  const std::vector<Batch> batches = must_parse(g.log.bytes());
  for (const size_t c : cuts) {
    g.segment_first_batch.push_back(c);
    g.segment_bases.push_back(batches[c].header.base_offset);
  }
  return g;
}

bool is_aborted(const GeneratedLog& g, const ModelRecord& r) {
  return r.txn >= 0 && g.txns[static_cast<size_t>(r.txn)].aborted;
}

// The model: the latest non-aborted keyed record per key.
std::map<std::string, ModelRecord> latest_per_key(const GeneratedLog& g) {
  std::map<std::string, ModelRecord> latest;
  for (const ModelRecord& r : g.records) {
    if (r.key && !is_aborted(g, r)) latest[*r.key] = r;
  }
  return latest;
}

// What a consumer that applies every record in order ends with.
std::map<std::string, std::string> consumer_view(const std::vector<Rec>& records) {
  std::map<std::string, std::string> view;
  for (const Rec& r : records) {
    if (!r.key) continue;
    if (r.value) {
      view[*r.key] = *r.value;
    } else {
      view.erase(*r.key);
    }
  }
  return view;
}

// A read_committed consumer: data of aborted ranges skipped.
std::vector<Rec> committed_records(const std::vector<Batch>& batches,
                                   const std::vector<AbortedTxnRange>& aborted) {
  std::vector<Batch> kept;
  for (const Batch& b : batches) {
    const bool skip =
        b.header.is_transactional() && !b.header.is_control() &&
        std::any_of(aborted.begin(), aborted.end(), [&](const AbortedTxnRange& a) {
          return a.producer_id == b.header.producer_id && a.first_offset <= b.header.base_offset &&
                 b.header.base_offset <= a.last_offset;
        });
    if (!skip) kept.push_back(b);
  }
  return data_records(kept);
}

// The segments of a log as bytes, cut at the given base offsets.
std::vector<io::Buffer> split(const io::Buffer& log, const std::vector<int64_t>& bases) {
  std::vector<std::vector<io::Buffer>> parts(bases.size());
  for (const Batch& b : must_parse(log)) {
    const auto it = std::upper_bound(bases.begin(), bases.end(), b.header.base_offset);
    parts[static_cast<size_t>(it - bases.begin() - 1)].push_back(b.bytes);
  }
  std::vector<io::Buffer> out;
  for (const auto& p : parts) out.push_back(concat(p));
  return out;
}

// The aborted ranges (of a txn index held per marker segment) overlapping
// [base, end).
std::vector<AbortedTxnRange> overlapping(const std::vector<AbortedTxnRange>& index, int64_t base,
                                         int64_t end) {
  std::vector<AbortedTxnRange> out;
  for (const AbortedTxnRange& a : index) {
    if (a.last_offset >= base && a.first_offset < end) out.push_back(a);
  }
  return out;
}

// A segmented log being cleaned in passes, as the log layer would drive it.
struct SegmentedLog {
  std::vector<io::Buffer> segments;
  std::vector<int64_t> bases;
  int64_t end_offset = 0;
  std::vector<AbortedTxnRange> index;  // the union of the segments' txn indexes
  ProducerLastRecords producers;

  int64_t segment_end(size_t i) const { return i + 1 < bases.size() ? bases[i + 1] : end_offset; }
  io::Buffer bytes() const { return concat(segments); }

  // One round: the map from `dirty_offset`; the segments below the map's end
  // cleaned. Returns where the next round starts.
  int64_t round(int64_t dirty_offset, int64_t now_ms, size_t map_bytes) {
    OffsetMap map(map_bytes);
    TxnTracker map_txns;
    for (size_t i = 0; i < segments.size(); ++i) {
      if (segment_end(i) <= dirty_offset) continue;
      absl::StatusOr<BuildMapResult> built = build_offset_map(
          segments[i],
          {.start_offset = dirty_offset, .end_offset = segment_end(i),
           .aborted = overlapping(index, bases[i], segment_end(i))},
          map, map_txns);
      RC_ASSERT(built.ok());
      if (built->progress == MapProgress::kMapFull) break;
    }
    const int64_t round_end = map.latest_offset() + 1;
    RC_ASSERT(round_end > dirty_offset);
    clean_below(map, round_end, now_ms);
    return round_end;
  }

  void clean_below(const OffsetMap& map, int64_t round_end, int64_t now_ms) {
    TxnTracker txns;
    std::vector<AbortedTxnRange> new_index;
    for (size_t i = 0; i < segments.size(); ++i) {
      const std::vector<AbortedTxnRange> aborted = overlapping(index, bases[i], segment_end(i));
      if (bases[i] >= round_end) {
        for (const AbortedTxnRange& a : index) {
          if (a.last_offset >= bases[i] && a.last_offset < segment_end(i)) new_index.push_back(a);
        }
        continue;
      }
      absl::StatusOr<CleanResult> r = clean_segment(segments[i], map,
                                                    {.current_time_ms = now_ms,
                                                     .delete_retention_ms = kRetentionMs,
                                                     .aborted = aborted,
                                                     .active_producers = producers,
                                                     .round_end_offset = end_offset},
                                                    txns);
      RC_ASSERT(r.ok());
      RC_ASSERT(r->bytes.size() == r->bytes_written);
      RC_ASSERT(r->records_kept + r->records_removed == r->records_read);
      segments[i] = r->bytes;
      new_index.insert(new_index.end(), r->aborted_retained.begin(), r->aborted_retained.end());
    }
    index = new_index;
  }
};

SegmentedLog segmented(const GeneratedLog& g) {
  SegmentedLog s;
  s.bases = g.segment_bases;
  s.end_offset = g.log.end_offset();
  s.segments = split(g.log.bytes(), s.bases);
  s.index = g.aborted();
  RC_ASSERT(scan_producer_last_records(g.log.bytes(), s.producers).ok());
  return s;
}

// Every batch is valid, batches and records are in strictly increasing
// offset order, and every batch keeps the offset range of an input batch.
void check_structure(const std::vector<Batch>& batches, const std::vector<Batch>& original) {
  std::map<int64_t, int64_t> ranges;
  for (const Batch& b : original) ranges[b.header.base_offset] = b.header.last_offset();
  int64_t last = -1;
  for (const Batch& b : batches) {
    RC_ASSERT(ranges.contains(b.header.base_offset));
    RC_ASSERT(ranges[b.header.base_offset] == b.header.last_offset());
    RC_ASSERT(b.header.base_offset > last);
    RC_ASSERT(b.records.size() == static_cast<size_t>(b.header.records_count));
    for (const net::Record& r : b.records) {
      const int64_t offset = net::record_offset(b.header, r);
      RC_ASSERT(offset > last);
      RC_ASSERT(offset <= b.header.last_offset());
      last = offset;
    }
    last = b.header.last_offset();
  }
}

// The state every active producer needs is still in the log.
void check_producer_state(const std::vector<Batch>& batches, const ProducerLastRecords& producers) {
  for (const auto& entry : producers) {
    // Named copies: clang 14 cannot capture structured bindings.
    const int64_t pid = entry.first;
    const ProducerLastRecord& last = entry.second;
    const bool found = std::any_of(batches.begin(), batches.end(), [&](const Batch& b) {
      if (b.header.producer_id != pid) return false;
      if (last.last_data_offset) return b.header.last_offset() == *last.last_data_offset;
      return b.header.is_control() && b.header.producer_epoch == last.producer_epoch;
    });
    RC_ASSERT(found);
  }
}

// Each key has at most one record, its latest; tombstones only while wanted.
void check_against_model(const GeneratedLog& g, const std::vector<Batch>& batches,
                         bool tombstones_kept) {
  const std::map<std::string, ModelRecord> latest = latest_per_key(g);
  std::map<std::string, Rec> seen;
  for (const Rec& r : data_records(batches)) {
    RC_ASSERT(r.key.has_value());  // the map covers everything: no null keys
    RC_ASSERT(!seen.contains(*r.key));
    seen[*r.key] = r;
  }
  for (const auto& [key, m] : latest) {
    const bool expected = m.value.has_value() || tombstones_kept;
    RC_ASSERT(seen.contains(key) == expected);
    if (expected) RC_ASSERT(seen[key] == (Rec{m.offset, m.key, m.value}));
  }
  RC_ASSERT(seen.size() <= latest.size());
}

// After enough passes, a marker keeps its record exactly while a data batch
// of its transaction remains, and the txn index lists exactly the aborted
// transactions with data left.
void check_markers_settled(const GeneratedLog& g, const std::vector<Batch>& batches,
                           const std::vector<AbortedTxnRange>& index) {
  std::set<int> with_data;
  for (const Batch& b : batches) {
    if (!b.header.is_control()) with_data.insert(g.batch_txn.at(b.header.base_offset));
  }
  std::set<int64_t> index_markers;
  for (const AbortedTxnRange& a : index) index_markers.insert(a.last_offset);
  std::set<int64_t> expected_index;
  for (const Batch& b : batches) {
    if (!b.header.is_control()) continue;
    const int t = g.batch_txn.at(b.header.base_offset);
    RC_ASSERT(b.records.empty() != with_data.contains(t));
    if (g.txns[static_cast<size_t>(t)].aborted && with_data.contains(t)) {
      expected_index.insert(b.header.base_offset);
    }
  }
  RC_ASSERT(index_markers == expected_index);
}

// Passes over a random log with transactions, tombstones and segments: what
// survives is the model's latest non-aborted record per key, tombstones until
// the pass after the horizon, markers until their data is gone and their
// horizon passed, and a consumer reads the same before and after.
RC_GTEST_PROP(CompactionModel, CleanedLogReadsLikeTheOriginal, ()) {
  const GeneratedLog g = gen_log();
  const std::vector<Batch> original = must_parse(g.log.bytes());
  const std::map<std::string, std::string> expected_view =
      consumer_view(committed_records(original, g.aborted()));
  SegmentedLog s = segmented(g);
  const int64_t gaps[] = {0, kRetentionMs / 2, kRetentionMs - 1, kRetentionMs, 3 * kRetentionMs};
  int64_t now_ms = kNowMs;
  for (int pass = 0; pass < 6; ++pass) {
    if (pass > 0) {
      now_ms += pass < 3 ? *rc::gen::elementOf(std::vector<int64_t>(std::begin(gaps), std::end(gaps)))
                         : 2 * kRetentionMs;
    }
    RC_ASSERT(s.round(0, now_ms, kCap) == s.end_offset);
    const io::Buffer bytes = s.bytes();
    absl::StatusOr<std::vector<Batch>> batches = parse(bytes);
    RC_ASSERT(batches.ok());
    check_structure(*batches, original);
    check_producer_state(*batches, s.producers);
    check_against_model(g, *batches, pass == 0 || now_ms < kNowMs + kRetentionMs);
    // No aborted data is left: a plain read and a read_committed one agree.
    RC_ASSERT(consumer_view(data_records(*batches)) == expected_view);
    RC_ASSERT(consumer_view(committed_records(*batches, s.index)) == expected_view);
    if (pass == 5) {
      check_markers_settled(g, *batches, s.index);
      const auto empty = [](const Batch& b) { return b.records.empty(); };
      RC_CLASSIFY(std::any_of(batches->begin(), batches->end(), empty), "empty batch kept");
      RC_CLASSIFY(!s.index.empty(), "aborted txn kept in index");
    }
  }
  RC_CLASSIFY(!g.aborted().empty(), "aborted txn");
  RC_CLASSIFY(g.segment_bases.size() > 1, "several segments");
}

// With an offset map too small for the dirty keys, cleaning goes in rounds,
// each starting where the last one's map ended, and ends where one big map
// would.
RC_GTEST_PROP(CompactionModel, SmallMapCleansInRounds, ()) {
  const GeneratedLog g = gen_log();
  const std::vector<Batch> original = must_parse(g.log.bytes());
  const std::map<std::string, std::string> expected_view =
      consumer_view(committed_records(original, g.aborted()));
  SegmentedLog s = segmented(g);
  const size_t map_bytes =
      static_cast<size_t>(*rc::gen::inRange(1, 4)) * (OffsetMap::kEntryOverheadBytes + 2);
  int64_t dirty = 0;
  int rounds = 0;
  while (dirty < s.end_offset) {
    dirty = s.round(dirty, kNowMs, map_bytes);
    ++rounds;
    RC_ASSERT(rounds <= 1000);
    absl::StatusOr<std::vector<Batch>> batches = parse(s.bytes());
    RC_ASSERT(batches.ok());
    check_structure(*batches, original);
    RC_ASSERT(consumer_view(committed_records(*batches, s.index)) == expected_view);
  }
  const std::vector<Batch> batches = must_parse(s.bytes());
  check_against_model(g, batches, true);
  RC_ASSERT(consumer_view(data_records(batches)) == expected_view);
  check_producer_state(batches, s.producers);
}

// Damaged segments (a byte changed behind a recomputed CRC, so the record
// parser and the offset checks see it) give errors or valid output, never a
// crash or an assertion.
RC_GTEST_PROP(CompactionModel, DamagedSegmentsNeverCrash, ()) {
  const GeneratedLog g = gen_log();
  io::Buffer log = io::Buffer::copy_of(g.log.bytes().span());
  const std::vector<Batch> batches = must_parse(log);
  size_t start = 0;
  const size_t victim = *rc::gen::inRange<size_t>(0, batches.size());
  for (size_t i = 0; i < victim; ++i) start += batches[i].bytes.size();
  const size_t size = batches[victim].bytes.size();
  // Anything after the length field and magic but the CRC itself.
  const size_t at = *rc::gen::element(*rc::gen::inRange<size_t>(0, 12),
                                      *rc::gen::inRange<size_t>(net::kBatchAttributesOffset, size));
  std::byte* p = log.mutable_data() + start;
  p[at] ^= static_cast<std::byte>(*rc::gen::inRange(1, 256));
  const uint32_t crc = net::compute_batch_crc({p, size});
  for (size_t i = 0; i < 4; ++i) {
    p[net::kBatchCrcOffset + i] = static_cast<std::byte>(crc >> (8 * (3 - i)));
  }
  OffsetMap map(kCap);
  TxnTracker map_txns;
  const absl::StatusOr<BuildMapResult> built = build_offset_map(
      log, {.start_offset = 0, .end_offset = g.log.end_offset(), .aborted = g.aborted()}, map,
      map_txns);
  ProducerLastRecords producers;
  (void)scan_producer_last_records(log, producers);  // may fail: only must not crash
  TxnTracker txns;
  const absl::StatusOr<CleanResult> cleaned =
      clean_segment(log, map,
                    {.current_time_ms = kNowMs, .delete_retention_ms = kRetentionMs,
                     .aborted = g.aborted(), .active_producers = producers},
                    txns);
  RC_TAG(built.ok(), cleaned.ok());
  if (cleaned.ok()) RC_ASSERT(parse(cleaned->bytes).ok());
}

}  // namespace
}  // namespace brook::storage
