// net/kafka/record_batch.h
//
// Kafka record batches, message format v2 (magic 2, KIP-98): the unit of
// data in Produce and Fetch `records` fields and in the log.
//
// A batch is a 61-byte big-endian header followed by its records, which are
// compressed as one stream when the attributes name a codec:
//
//   offset size field
//        0    8 baseOffset
//        8    4 batchLength            bytes after this field
//       12    4 partitionLeaderEpoch
//       16    1 magic                  2
//       17    4 crc                    CRC-32C of bytes [21, end)
//       21    2 attributes             bits 0-2 codec, 3 LogAppendTime,
//                                      4 transactional, 5 control,
//                                      6 delete horizon in baseTimestamp
//       23    4 lastOffsetDelta
//       27    8 baseTimestamp
//       35    8 maxTimestamp
//       43    8 producerId
//       51    2 producerEpoch
//       53    4 baseSequence
//       57    4 recordsCount
//       61      records
//
// Each record is varint-framed:
//
//   length varint (bytes after this field), attributes int8,
//   timestampDelta varlong, offsetDelta varint,
//   keyLength varint (-1: null), key, valueLength varint (-1: null), value,
//   headers count varint, then per header:
//     keyLength varint, key, valueLength varint (-1: null), value
//
// Everything here reads untrusted bytes: every length is checked against the
// bytes present before it is used, nothing is allocated in proportion to a
// claimed length, and decompression has a caller-supplied cap. Parsed keys,
// values and batches are io::Buffer slices of their input (or of the
// decompressed records), never copies.
//
// Errors (absl::StatusCode):
//   OutOfRange       the input ends inside a batch: a partial batch, which
//                    more bytes may complete (Fetch responses may end so);
//   DataLoss         a corrupt batch or record: bad lengths, counts, CRC,
//                    compressed stream (Kafka's CORRUPT_MESSAGE);
//   Unimplemented    magic 0 or 1 (the legacy message sets; Kafka answers
//                    UNSUPPORTED_FOR_MESSAGE_FORMAT or CORRUPT_MESSAGE);
//   ResourceExhausted a batch or its decompressed records exceed a cap;
//   InvalidArgument  the caller's mistake: the builder was given values a
//                    batch cannot carry, or verify_crc / decode_records were
//                    given bytes other than exactly one batch.
//
// All functions are pure; the types are single-loop values like io::Buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "net/codec/compression.h"

namespace brook::net {

// Field offsets of the v2 batch header.
inline constexpr size_t kBatchBaseOffsetOffset = 0;
inline constexpr size_t kBatchLengthOffset = 8;
inline constexpr size_t kBatchPartitionLeaderEpochOffset = 12;
inline constexpr size_t kBatchMagicOffset = 16;
inline constexpr size_t kBatchCrcOffset = 17;
inline constexpr size_t kBatchAttributesOffset = 21;
inline constexpr size_t kBatchLastOffsetDeltaOffset = 23;
inline constexpr size_t kBatchBaseTimestampOffset = 27;
inline constexpr size_t kBatchMaxTimestampOffset = 35;
inline constexpr size_t kBatchProducerIdOffset = 43;
inline constexpr size_t kBatchProducerEpochOffset = 51;
inline constexpr size_t kBatchBaseSequenceOffset = 53;
inline constexpr size_t kBatchRecordsCountOffset = 57;
// RECORD_BATCH_OVERHEAD: the header, and the smallest valid batch.
inline constexpr size_t kBatchHeaderBytes = 61;
// LOG_OVERHEAD: baseOffset + batchLength, the part batchLength leaves out.
inline constexpr size_t kBatchLogOverheadBytes = 12;
inline constexpr int32_t kBatchLengthMin =
    static_cast<int32_t>(kBatchHeaderBytes - kBatchLogOverheadBytes);  // 49
static_assert(kBatchRecordsCountOffset + 4 == kBatchHeaderBytes);
static_assert(kBatchLengthOffset + 4 == kBatchLogOverheadBytes);

inline constexpr int8_t kRecordBatchMagic = 2;
// Legacy message sets (magic 0, 1) are at least this long after the length
// field (LegacyRecord.RECORD_OVERHEAD_V0); anything shorter is corrupt in
// every format.
inline constexpr int32_t kLegacyMessageLengthMin = 14;

// Attribute bits.
inline constexpr int16_t kBatchTimestampTypeBit = 1 << 3;
inline constexpr int16_t kBatchTransactionalBit = 1 << 4;
inline constexpr int16_t kBatchControlBit = 1 << 5;
inline constexpr int16_t kBatchDeleteHorizonBit = 1 << 6;

// RecordBatch.NO_PRODUCER_ID and friends.
inline constexpr int64_t kNoProducerId = -1;
inline constexpr int16_t kNoProducerEpoch = -1;
inline constexpr int32_t kNoSequence = -1;
inline constexpr int32_t kNoPartitionLeaderEpoch = -1;
inline constexpr int64_t kNoTimestamp = -1;

// The smallest record: length, attributes, timestampDelta, offsetDelta,
// keyLength, valueLength and headers count, one byte each.
inline constexpr size_t kRecordBytesMin = 7;
// The smallest record header: keyLength and valueLength, one byte each.
inline constexpr size_t kRecordHeaderBytesMin = 2;

enum class TimestampType : uint8_t { kCreateTime = 0, kLogAppendTime = 1 };

struct RecordBatchHeader {
  int64_t base_offset = 0;
  int32_t batch_length = 0;
  int32_t partition_leader_epoch = kNoPartitionLeaderEpoch;
  int8_t magic = kRecordBatchMagic;
  uint32_t crc = 0;
  int16_t attributes = 0;
  int32_t last_offset_delta = 0;
  int64_t base_timestamp = kNoTimestamp;
  int64_t max_timestamp = kNoTimestamp;
  int64_t producer_id = kNoProducerId;
  int16_t producer_epoch = kNoProducerEpoch;
  int32_t base_sequence = kNoSequence;
  int32_t records_count = 0;

  // attributes & 7. Ids 5-7 are not codecs: decode_records rejects them
  // (codec::compression_from_attributes says why).
  codec::Compression compression() const {
    return static_cast<codec::Compression>(attributes & codec::kCompressionAttributeMask);
  }
  TimestampType timestamp_type() const {
    return (attributes & kBatchTimestampTypeBit) != 0 ? TimestampType::kLogAppendTime
                                                      : TimestampType::kCreateTime;
  }
  bool is_transactional() const { return (attributes & kBatchTransactionalBit) != 0; }
  bool is_control() const { return (attributes & kBatchControlBit) != 0; }
  // KIP-534: baseTimestamp holds the time after which tombstones and
  // transaction markers may be removed by compaction.
  bool has_delete_horizon() const { return (attributes & kBatchDeleteHorizonBit) != 0; }
  // Offsets wrap like Kafka's Java arithmetic instead of overflowing.
  int64_t last_offset() const {
    return static_cast<int64_t>(static_cast<uint64_t>(base_offset) +
                                static_cast<uint64_t>(static_cast<int64_t>(last_offset_delta)));
  }
  int64_t next_offset() const {
    return static_cast<int64_t>(static_cast<uint64_t>(last_offset()) + 1);
  }
  // The whole batch: batchLength plus the 12 bytes before it.
  // REQUIRES: a parsed header (batch_length >= kBatchLengthMin).
  size_t size_bytes() const {
    return static_cast<size_t>(batch_length) + kBatchLogOverheadBytes;
  }

  bool operator==(const RecordBatchHeader&) const = default;
};

// How much of a batch parse_batch_header needs to see.
enum class BatchExtent : uint8_t {
  // The whole batch (batchLength + 12 bytes) must be present.
  kWhole,
  // Only the 61-byte header (for readers that fetch the body later).
  kHeaderOnly,
};

// Reads and checks the header at the front of `bytes` (which may continue
// past the batch). Checks, in Kafka's order: the length field is at least the
// legacy minimum (14), magic is 2, batchLength >= 49, the batch (or header)
// is present, recordsCount >= 0, lastOffsetDelta >= 0. Does not check the
// CRC (verify_crc) or the records (decode_records).
absl::StatusOr<RecordBatchHeader> parse_batch_header(std::span<const std::byte> bytes,
                                                     BatchExtent extent = BatchExtent::kWhole);

// CRC-32C of a batch's bytes from attributes (offset 21) to its end.
// REQUIRES: batch.size() >= kBatchHeaderBytes.
uint32_t compute_batch_crc(std::span<const std::byte> batch);

// Whether the stored CRC matches the batch's bytes: DataLoss naming both
// values when not. `batch` must be exactly the batch header.size_bytes()
// describes (InvalidArgument otherwise).
absl::Status verify_crc(const RecordBatchHeader& header, std::span<const std::byte> batch);

// One batch of a records buffer: its header and the whole batch's bytes.
struct BatchView {
  RecordBatchHeader header;
  io::Buffer bytes;
};

enum class CrcCheck : uint8_t { kVerify, kSkip };
enum class PartialBatch : uint8_t {
  // A trailing partial batch ends iteration; partial_bytes() says so.
  kAllow,
  // A trailing partial batch is an OutOfRange error (Produce requests).
  kReject,
};

struct BatchIteratorOptions {
  CrcCheck crc = CrcCheck::kVerify;
  PartialBatch partial = PartialBatch::kAllow;
  // message.max.bytes: a larger batch is ResourceExhausted (Kafka's
  // RecordTooLargeException). The default accepts any batch.
  size_t batch_bytes_max = std::numeric_limits<size_t>::max();
};

// Walks the batches of a `records` buffer (Produce, Fetch, a log segment)
// without copying: each batch comes out as a slice of the buffer.
//
//   BatchIterator it(records);
//   while (true) {
//     absl::StatusOr<std::optional<BatchView>> next = it.next();
//     if (!next.ok()) return next.status();   // malformed: stop
//     if (!next->has_value()) break;          // end, or a partial batch
//     use((*next)->header, (*next)->bytes);
//   }
//   if (it.partial_bytes() > 0) ...           // a truncated last batch
//
// Errors are sticky: after one, next() returns it again.
class BatchIterator {
 public:
  explicit BatchIterator(io::Buffer records, BatchIteratorOptions options = {})
      : records_(std::move(records)), options_(options) {}

  // The next complete batch; std::nullopt at the end of the buffer or at a
  // partial trailing batch (with PartialBatch::kAllow); an error for a
  // malformed batch.
  absl::StatusOr<std::optional<BatchView>> next();

  // Bytes consumed by the batches returned so far.
  size_t position() const { return position_; }
  // After next() returned std::nullopt: the bytes of the partial batch left
  // at the end (0 when the buffer ended on a batch boundary).
  size_t partial_bytes() const { return done_ ? records_.size() - position_ : 0; }

 private:
  io::Buffer records_;
  BatchIteratorOptions options_;
  size_t position_ = 0;
  bool done_ = false;
  absl::Status error_;
};

// A record header. Keys are UTF-8 in Kafka; they are kept as the bytes sent.
struct RecordHeader {
  std::string key;
  std::optional<io::Buffer> value;
  bool operator==(const RecordHeader&) const = default;
};

// One record as stored: timestamp and offset relative to its batch.
struct Record {
  int8_t attributes = 0;
  int64_t timestamp_delta = 0;
  int32_t offset_delta = 0;
  std::optional<io::Buffer> key;
  std::optional<io::Buffer> value;
  std::vector<RecordHeader> headers;
  bool operator==(const Record&) const = default;
};

// The record's absolute offset and timestamp (LogAppendTime batches carry
// one timestamp for all records: maxTimestamp). Both wrap like Java.
int64_t record_offset(const RecordBatchHeader& header, const Record& record);
int64_t record_timestamp(const RecordBatchHeader& header, const Record& record);

// The records of one whole batch (as BatchIterator yields it), decompressed
// when the attributes name a codec; at most `max_uncompressed_bytes` of
// decompressed records (ResourceExhausted beyond; uncompressed batches are
// already in memory and not capped). Checks that every record's length
// matches its fields exactly, that the records fill the payload exactly, and
// that there are recordsCount of them. Does not check the CRC.
absl::StatusOr<std::vector<Record>> decode_records(const io::Buffer& batch,
                                                   size_t max_uncompressed_bytes);

// What validation needs of one record, without copying or referencing its
// key, value and headers.
struct RecordSummary {
  int8_t attributes = 0;
  int64_t timestamp_delta = 0;
  int32_t offset_delta = 0;
  bool has_key = false;
};

// As record_timestamp above, for a summary.
int64_t record_timestamp(const RecordBatchHeader& header, const RecordSummary& record);

// The same walk and the same checks as decode_records, handing each record's
// summary to `visit` in order instead of keeping the records; `visit`
// returning false stops the walk early (OK; the rest is then unchecked).
absl::Status visit_records(const io::Buffer& batch, size_t max_uncompressed_bytes,
                           absl::FunctionRef<bool(const RecordSummary&)> visit);

// ---------------------------------------------------------------------------
// Control records (KIP-98): the only record of a control batch. Its key says
// what it marks; commit and abort markers carry an EndTxnMarker value.

enum class ControlRecordType : int16_t {
  kAbort = 0,
  kCommit = 1,
  kLeaderChange = 2,    // KRaft (KIP-595)
  kSnapshotHeader = 3,  // KRaft snapshots (KIP-630)
  kSnapshotFooter = 4,
  kKRaftVersion = 5,  // KIP-853
  kKRaftVoters = 6,
};

inline constexpr int16_t kControlRecordKeyVersion = 0;
inline constexpr size_t kControlRecordKeyBytes = 4;
inline constexpr int16_t kEndTxnMarkerVersion = 0;
inline constexpr size_t kEndTxnMarkerBytes = 6;

struct ControlRecordKey {
  int16_t version = kControlRecordKeyVersion;
  // Any value may arrive; Kafka treats those it does not know as UNKNOWN.
  ControlRecordType type = ControlRecordType::kAbort;
  bool operator==(const ControlRecordKey&) const = default;
};

struct EndTxnMarker {
  int16_t version = kEndTxnMarkerVersion;
  int32_t coordinator_epoch = 0;
  bool operator==(const EndTxnMarker&) const = default;
};

// Key: version int16, type int16. DataLoss when shorter than 4 bytes or the
// version is negative; newer versions are read as version 0 (bytes after the
// first 4 are ignored), as Kafka does.
absl::StatusOr<ControlRecordKey> decode_control_record_key(std::span<const std::byte> key);
// Value: version int16, coordinatorEpoch int32; the same rules, 6 bytes.
absl::StatusOr<EndTxnMarker> decode_end_txn_marker(std::span<const std::byte> value);
io::Buffer encode_control_record_key(const ControlRecordKey& key);
io::Buffer encode_end_txn_marker(const EndTxnMarker& marker);

// ---------------------------------------------------------------------------
// Building batches.

// A record to append: absolute timestamp, key, value, headers.
struct NewRecord {
  int64_t timestamp_ms = 0;
  std::optional<io::Buffer> key;
  std::optional<io::Buffer> value;
  std::vector<RecordHeader> headers;
};

struct RecordBatchOptions {
  int64_t base_offset = 0;
  int32_t partition_leader_epoch = kNoPartitionLeaderEpoch;
  int64_t producer_id = kNoProducerId;
  int16_t producer_epoch = kNoProducerEpoch;
  int32_t base_sequence = kNoSequence;
  bool transactional = false;
  bool control = false;
  TimestampType timestamp_type = TimestampType::kCreateTime;
  // The batch's maxTimestamp when timestamp_type is kLogAppendTime.
  int64_t log_append_time_ms = kNoTimestamp;
  // KIP-534: when set, baseTimestamp is this horizon and attribute bit 6 is
  // set; record timestamps are stored relative to it.
  std::optional<int64_t> delete_horizon_ms;
  codec::Compression compression = codec::Compression::kNone;
  int compression_level = codec::kCompressionLevelDefault;
};

// Builds one v2 batch. Records get consecutive offset deltas 0, 1, ...;
// baseTimestamp is the first record's timestamp (or the delete horizon),
// maxTimestamp the largest (or the log append time), and batchLength and the
// CRC are computed by build(). A builder without records builds an empty
// batch (recordsCount 0, timestamps -1), as compaction may leave.
class RecordBatchBuilder {
 public:
  explicit RecordBatchBuilder(RecordBatchOptions options) : options_(std::move(options)) {}

  void append(NewRecord record) { records_.push_back(std::move(record)); }
  size_t record_count() const { return records_.size(); }

  // The batch. InvalidArgument if it cannot be represented (more than 2^31-1
  // records or bytes, an unknown codec); compression errors as
  // codec::compress reports them.
  absl::StatusOr<io::Buffer> build() const;

 private:
  RecordBatchOptions options_;
  std::vector<NewRecord> records_;
};

// Encodes one batch from a header and records as they are: each record's
// offset and timestamp deltas are written unchanged (relative to
// header.base_offset and header.base_timestamp), so a subset of a batch's
// records (compaction) keeps its offsets. records_count, batchLength and the
// CRC are computed; the records are compressed with the codec the header's
// attributes name. Record attributes are written as 0, as Kafka does.
// InvalidArgument when the batch cannot be represented (an unknown codec,
// a field or the batch past 2 GiB).
absl::StatusOr<io::Buffer> encode_batch(RecordBatchHeader header, std::span<const Record> records,
                                        int compression_level = codec::kCompressionLevelDefault);

// A commit or abort marker batch (what WriteTxnMarkers appends): control and
// transactional, uncompressed, one record with the control key and an
// EndTxnMarker value, base sequence -1.
struct TxnMarkerBatch {
  ControlRecordType type = ControlRecordType::kCommit;
  int64_t base_offset = 0;
  int32_t partition_leader_epoch = kNoPartitionLeaderEpoch;
  int64_t producer_id = kNoProducerId;
  int16_t producer_epoch = kNoProducerEpoch;
  int32_t coordinator_epoch = 0;
  int64_t timestamp_ms = 0;
};
io::Buffer build_txn_marker_batch(const TxnMarkerBatch& marker);

}  // namespace brook::net
