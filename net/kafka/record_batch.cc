// net/kafka/record_batch.cc
//
// Parsing, checking and building v2 record batches (see record_batch.h for
// the format). The checks follow Kafka's DefaultRecordBatch and
// DefaultRecord (ensureValid, readFrom), with two deliberate differences:
// a key or value length below -1 is an error here (Kafka reads it as null),
// and a header's value length below -1 likewise.
#include "net/kafka/record_batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "io/assert.h"
#include "io/status.h"
#include "net/codec/crc32c.h"
#include "net/codec/endian.h"
#include "net/codec/varint.h"

namespace brook::net {
namespace {

using codec::load_be;
using codec::store_be;

int64_t wrapping_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrapping_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}

RecordBatchHeader read_header_fields(std::span<const std::byte> b) {
  RecordBatchHeader h;
  h.base_offset = load_be<int64_t>(b, kBatchBaseOffsetOffset);
  h.batch_length = load_be<int32_t>(b, kBatchLengthOffset);
  h.partition_leader_epoch = load_be<int32_t>(b, kBatchPartitionLeaderEpochOffset);
  h.magic = load_be<int8_t>(b, kBatchMagicOffset);
  h.crc = load_be<uint32_t>(b, kBatchCrcOffset);
  h.attributes = load_be<int16_t>(b, kBatchAttributesOffset);
  h.last_offset_delta = load_be<int32_t>(b, kBatchLastOffsetDeltaOffset);
  h.base_timestamp = load_be<int64_t>(b, kBatchBaseTimestampOffset);
  h.max_timestamp = load_be<int64_t>(b, kBatchMaxTimestampOffset);
  h.producer_id = load_be<int64_t>(b, kBatchProducerIdOffset);
  h.producer_epoch = load_be<int16_t>(b, kBatchProducerEpochOffset);
  h.base_sequence = load_be<int32_t>(b, kBatchBaseSequenceOffset);
  h.records_count = load_be<int32_t>(b, kBatchRecordsCountOffset);
  return h;
}

void write_header_fields(const RecordBatchHeader& h, std::byte* out) {
  store_be(out + kBatchBaseOffsetOffset, h.base_offset);
  store_be(out + kBatchLengthOffset, h.batch_length);
  store_be(out + kBatchPartitionLeaderEpochOffset, h.partition_leader_epoch);
  store_be(out + kBatchMagicOffset, h.magic);
  store_be(out + kBatchCrcOffset, h.crc);
  store_be(out + kBatchAttributesOffset, h.attributes);
  store_be(out + kBatchLastOffsetDeltaOffset, h.last_offset_delta);
  store_be(out + kBatchBaseTimestampOffset, h.base_timestamp);
  store_be(out + kBatchMaxTimestampOffset, h.max_timestamp);
  store_be(out + kBatchProducerIdOffset, h.producer_id);
  store_be(out + kBatchProducerEpochOffset, h.producer_epoch);
  store_be(out + kBatchBaseSequenceOffset, h.base_sequence);
  store_be(out + kBatchRecordsCountOffset, h.records_count);
}

absl::Status check_magic(int8_t magic) {
  if (magic == kRecordBatchMagic) return absl::OkStatus();
  if (magic == 0 || magic == 1) {
    return absl::UnimplementedError(fmt::format(
        "message format v{} (magic {}) is not supported: only record batches of magic 2", magic,
        magic));
  }
  return absl::DataLossError(
      fmt::format("unknown magic {} (record batches have magic 2)", magic));
}

}  // namespace

absl::StatusOr<RecordBatchHeader> parse_batch_header(std::span<const std::byte> bytes,
                                                     BatchExtent extent) {
  if (bytes.size() < kBatchLogOverheadBytes) {
    return absl::OutOfRangeError(fmt::format(
        "partial batch: {} bytes end before its offset and length fields (12 bytes)",
        bytes.size()));
  }
  const auto length = load_be<int32_t>(bytes, kBatchLengthOffset);
  if (length < kLegacyMessageLengthMin) {
    return absl::DataLossError(fmt::format(
        "batch length {} is below the minimum of any message format ({})", length,
        kLegacyMessageLengthMin));
  }
  if (bytes.size() <= kBatchMagicOffset) {
    return absl::OutOfRangeError(
        fmt::format("partial batch: {} bytes end before its magic byte", bytes.size()));
  }
  if (absl::Status s = check_magic(load_be<int8_t>(bytes, kBatchMagicOffset)); !s.ok()) return s;
  if (length < kBatchLengthMin) {
    return absl::DataLossError(fmt::format(
        "batch length {} is below the minimum of {} (the header after the length field)", length,
        kBatchLengthMin));
  }
  const size_t total = static_cast<size_t>(length) + kBatchLogOverheadBytes;
  const size_t needed = extent == BatchExtent::kWhole ? total : kBatchHeaderBytes;
  if (bytes.size() < needed) {
    return absl::OutOfRangeError(
        fmt::format("partial batch: {} of its {} bytes present", bytes.size(), total));
  }
  RecordBatchHeader h = read_header_fields(bytes);
  if (h.records_count < 0) {
    return absl::DataLossError(fmt::format("negative records count {}", h.records_count));
  }
  if (h.last_offset_delta < 0) {
    return absl::DataLossError(fmt::format("negative last offset delta {}", h.last_offset_delta));
  }
  return h;
}

uint32_t compute_batch_crc(std::span<const std::byte> batch) {
  BROOK_ASSERT(batch.size() >= kBatchHeaderBytes);
  return codec::crc32c(0, batch.subspan(kBatchAttributesOffset));
}

absl::Status verify_crc(const RecordBatchHeader& header, std::span<const std::byte> batch) {
  if (header.batch_length < kBatchLengthMin || batch.size() != header.size_bytes()) {
    return absl::InvalidArgumentError(fmt::format(
        "verify_crc: {} bytes given for a batch of length {}", batch.size(), header.batch_length));
  }
  const uint32_t computed = compute_batch_crc(batch);
  if (computed != header.crc) {
    return absl::DataLossError(fmt::format(
        "batch at offset {} is corrupt: stored CRC {:#010x}, computed {:#010x}",
        header.base_offset, header.crc, computed));
  }
  return absl::OkStatus();
}

// --- BatchIterator ----------------------------------------------------------

absl::StatusOr<std::optional<BatchView>> BatchIterator::next() {
  if (!error_.ok()) return error_;
  if (done_) return std::optional<BatchView>();
  const std::span<const std::byte> rest = records_.span().subspan(position_);
  const auto fail = [&](absl::Status s) {
    error_ = absl::Status(
        s.code(), fmt::format("batch at byte {}: {}", position_, std::string(s.message())));
    return error_;
  };
  const auto partial = [&](absl::Status s) -> absl::StatusOr<std::optional<BatchView>> {
    if (options_.partial == PartialBatch::kReject) return fail(std::move(s));
    done_ = true;
    return std::optional<BatchView>();
  };
  if (rest.empty()) {
    done_ = true;
    return std::optional<BatchView>();
  }
  absl::StatusOr<RecordBatchHeader> header = parse_batch_header(rest, BatchExtent::kHeaderOnly);
  if (!header.ok()) {
    if (header.status().code() == absl::StatusCode::kOutOfRange) return partial(header.status());
    return fail(header.status());
  }
  const size_t size = header->size_bytes();
  if (size > options_.batch_bytes_max) {
    return fail(absl::ResourceExhaustedError(fmt::format(
        "batch of {} bytes is larger than the limit of {} bytes", size, options_.batch_bytes_max)));
  }
  if (rest.size() < size) {
    return partial(absl::OutOfRangeError(
        fmt::format("partial batch: {} of its {} bytes present", rest.size(), size)));
  }
  if (options_.crc == CrcCheck::kVerify) {
    if (absl::Status s = verify_crc(*header, rest.first(size)); !s.ok()) return fail(std::move(s));
  }
  BatchView view{*header, records_.slice(position_, size)};
  position_ += size;
  return std::optional<BatchView>(std::move(view));
}

// --- records -------------------------------------------------------------------

int64_t record_offset(const RecordBatchHeader& header, const Record& record) {
  return wrapping_add(header.base_offset, record.offset_delta);
}

namespace {

int64_t timestamp_with_delta(const RecordBatchHeader& header, int64_t timestamp_delta) {
  if (header.timestamp_type() == TimestampType::kLogAppendTime) return header.max_timestamp;
  return wrapping_add(header.base_timestamp, timestamp_delta);
}

}  // namespace

int64_t record_timestamp(const RecordBatchHeader& header, const Record& record) {
  return timestamp_with_delta(header, record.timestamp_delta);
}

int64_t record_timestamp(const RecordBatchHeader& header, const RecordSummary& record) {
  return timestamp_with_delta(header, record.timestamp_delta);
}

namespace {

enum class Nullability : uint8_t { kNullable, kNotNull };
constexpr Nullability kNullable = Nullability::kNullable;
constexpr Nullability kNotNull = Nullability::kNotNull;

// A bounds-checked walk over [pos, end) of a buffer. Each read returns false
// and names the problem in `error` on failure; slices share the buffer.
class RecordCursor {
 public:
  explicit RecordCursor(const io::Buffer& buffer) : buffer_(buffer), end_(buffer.size()) {}

  size_t position() const { return pos_; }
  size_t remaining() const { return end_ - pos_; }
  void set_end(size_t end) { end_ = end; }
  const std::string& error() const { return error_; }

  bool fail(std::string what) {
    if (error_.empty()) error_ = std::move(what);
    return false;
  }

  bool i8(int8_t* v) {
    if (remaining() < 1) return fail("truncated attributes");
    *v = static_cast<int8_t>(buffer_.data()[pos_++]);
    return true;
  }
  bool varint(int32_t* v, const char* field) {
    const size_t n = codec::read_varint({buffer_.data() + pos_, remaining()}, v);
    if (n == 0) return fail(fmt::format("malformed or truncated {} varint", field));
    pos_ += n;
    return true;
  }
  bool varlong(int64_t* v, const char* field) {
    const size_t n = codec::read_varlong({buffer_.data() + pos_, remaining()}, v);
    if (n == 0) return fail(fmt::format("malformed or truncated {} varlong", field));
    pos_ += n;
    return true;
  }
  // A length-prefixed byte string; -1 is null when kNullable.
  bool bytes(std::optional<io::Buffer>* out, const char* field, Nullability nullability) {
    size_t n = 0;
    bool present = false;
    if (!field_length(&n, &present, field, nullability)) return false;
    if (!present) {
      out->reset();
      return true;
    }
    *out = buffer_.slice(pos_, n);
    pos_ += n;
    return true;
  }
  // The same checks as bytes(), without taking a slice: the field is
  // skipped, and `present` says whether it was not null.
  bool skip_bytes(bool* present, const char* field, Nullability nullability) {
    size_t n = 0;
    if (!field_length(&n, present, field, nullability)) return false;
    pos_ += n;
    return true;
  }

 private:
  // The length prefix of a byte string, checked against what is left.
  bool field_length(size_t* n, bool* present, const char* field, Nullability nullability) {
    int32_t length = 0;
    if (!varint(&length, field)) return false;
    *n = 0;
    *present = !(length == -1 && nullability == Nullability::kNullable);
    if (!*present) return true;
    if (length < 0) return fail(fmt::format("invalid {} length {}", field, length));
    if (static_cast<size_t>(length) > remaining()) {
      return fail(fmt::format("{} length {} exceeds the {} bytes left", field, length,
                              remaining()));
    }
    *n = static_cast<size_t>(length);
    return true;
  }

  const io::Buffer& buffer_;
  size_t pos_ = 0;
  size_t end_;
  std::string error_;
};


// The headers of a record: kept in `headers` when it is not null, else only
// checked and skipped.
bool read_headers(RecordCursor& c, std::vector<RecordHeader>* headers) {
  int32_t count = 0;
  if (!c.varint(&count, "headers count")) return false;
  if (count < 0) return c.fail(fmt::format("invalid headers count {}", count));
  // Each header takes at least two bytes: bound the count before allocating.
  if (static_cast<size_t>(count) > c.remaining() / kRecordHeaderBytesMin) {
    return c.fail(fmt::format("headers count {} cannot fit in the {} bytes left", count,
                              c.remaining()));
  }
  if (headers == nullptr) {
    for (int32_t i = 0; i < count; ++i) {
      bool present = false;
      if (!c.skip_bytes(&present, "header key", kNotNull) ||
          !c.skip_bytes(&present, "header value", kNullable)) {
        return false;
      }
    }
    return true;
  }
  headers->resize(static_cast<size_t>(count));
  for (RecordHeader& h : *headers) {
    std::optional<io::Buffer> key;
    if (!c.bytes(&key, "header key", kNotNull)) return false;
    h.key.assign(key->view());
    if (!c.bytes(&h.value, "header value", kNullable)) return false;
  }
  return true;
}

// One record at the cursor: its length varint, then exactly that many bytes.
// With `r` its fields are kept; without, only `summary` is filled.
bool read_record(RecordCursor& c, size_t payload_end, Record* r, RecordSummary* summary) {
  int32_t length = 0;
  if (!c.varint(&length, "record length")) return false;
  if (length < 0) return c.fail(fmt::format("negative record length {}", length));
  if (static_cast<size_t>(length) > c.remaining()) {
    return c.fail(fmt::format("record length {} exceeds the {} bytes left", length,
                              c.remaining()));
  }
  const size_t record_start = c.position();
  const size_t record_end = record_start + static_cast<size_t>(length);
  c.set_end(record_end);
  if (!c.i8(&summary->attributes) ||
      !c.varlong(&summary->timestamp_delta, "timestamp delta") ||
      !c.varint(&summary->offset_delta, "offset delta")) {
    return false;
  }
  if (r != nullptr) {
    r->attributes = summary->attributes;
    r->timestamp_delta = summary->timestamp_delta;
    r->offset_delta = summary->offset_delta;
    if (!c.bytes(&r->key, "key", kNullable) || !c.bytes(&r->value, "value", kNullable) ||
        !read_headers(c, &r->headers)) {
      return false;
    }
    summary->has_key = r->key.has_value();
  } else {
    bool value_present = false;
    if (!c.skip_bytes(&summary->has_key, "key", kNullable) ||
        !c.skip_bytes(&value_present, "value", kNullable) || !read_headers(c, nullptr)) {
      return false;
    }
  }
  if (c.position() != record_end) {
    return c.fail(fmt::format("record length {} but its fields take {} bytes", length,
                              c.position() - record_start));
  }
  c.set_end(payload_end);
  return true;
}

// Walks `count` records filling `payload` exactly: into `records` when it
// is not null, else handing each one's summary to `visit`.
absl::Status parse_records(const io::Buffer& payload, int32_t count, std::vector<Record>* records,
                           absl::FunctionRef<bool(const RecordSummary&)> visit) {
  // Every record takes at least 7 bytes: bound the count before allocating.
  if (static_cast<size_t>(count) > payload.size() / kRecordBytesMin) {
    return absl::DataLossError(fmt::format("records count {} cannot fit in {} bytes of records",
                                           count, payload.size()));
  }
  if (records != nullptr) records->resize(static_cast<size_t>(count));
  RecordCursor c(payload);
  RecordSummary summary;
  for (size_t i = 0; i < static_cast<size_t>(count); ++i) {
    if (!read_record(c, payload.size(), records != nullptr ? &(*records)[i] : nullptr,
                     &summary)) {
      return absl::DataLossError(fmt::format("record {} of {}: {}", i, count, c.error()));
    }
    if (records == nullptr && !visit(summary)) return absl::OkStatus();
  }
  if (c.remaining() != 0) {
    return absl::DataLossError(
        fmt::format("{} bytes follow the last of {} records", c.remaining(), count));
  }
  return absl::OkStatus();
}

// decode_records and visit_records: the batch's records, decompressed.
absl::Status walk_records(const io::Buffer& batch, size_t max_uncompressed_bytes,
                          std::vector<Record>* records,
                          absl::FunctionRef<bool(const RecordSummary&)> visit) {
  absl::StatusOr<RecordBatchHeader> header = parse_batch_header(batch.span());
  if (!header.ok()) return header.status();
  if (batch.size() != header->size_bytes()) {
    return absl::InvalidArgumentError(fmt::format(
        "decode_records: {} bytes given for a batch of {}", batch.size(), header->size_bytes()));
  }
  // As Kafka: a batch without records has nothing to decode, whatever its
  // payload (compaction can leave such batches to keep producer state).
  if (header->records_count == 0) return absl::OkStatus();
  absl::StatusOr<codec::Compression> compression =
      codec::compression_from_attributes(header->attributes);
  if (!compression.ok()) return absl::DataLossError(std::string(compression.status().message()));
  io::Buffer payload = batch.slice(kBatchHeaderBytes);
  if (*compression != codec::Compression::kNone) {
    absl::StatusOr<io::Buffer> decompressed =
        codec::decompress(*compression, payload.span(), max_uncompressed_bytes);
    if (!decompressed.ok()) {
      return absl::Status(decompressed.status().code(),
                          fmt::format("batch at offset {}: {}", header->base_offset,
                                      std::string(decompressed.status().message())));
    }
    payload = *std::move(decompressed);
  }
  absl::Status status = parse_records(payload, header->records_count, records, visit);
  if (!status.ok()) {
    return absl::Status(status.code(), fmt::format("batch at offset {}: {}", header->base_offset,
                                                   std::string(status.message())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Record>> decode_records(const io::Buffer& batch,
                                                   size_t max_uncompressed_bytes) {
  std::vector<Record> records;
  RETURN_IF_ERROR(walk_records(batch, max_uncompressed_bytes, &records,
                               [](const RecordSummary&) { return true; }));
  return records;
}

absl::Status visit_records(const io::Buffer& batch, size_t max_uncompressed_bytes,
                           absl::FunctionRef<bool(const RecordSummary&)> visit) {
  return walk_records(batch, max_uncompressed_bytes, nullptr, visit);
}

// --- control records -------------------------------------------------------------

absl::StatusOr<ControlRecordKey> decode_control_record_key(std::span<const std::byte> key) {
  if (key.size() < kControlRecordKeyBytes) {
    return absl::DataLossError(fmt::format(
        "control record key of {} bytes: at least {} needed", key.size(), kControlRecordKeyBytes));
  }
  const auto version = load_be<int16_t>(key, 0);
  if (version < 0) {
    return absl::DataLossError(fmt::format("control record key version {}", version));
  }
  return ControlRecordKey{version, static_cast<ControlRecordType>(load_be<int16_t>(key, 2))};
}

absl::StatusOr<EndTxnMarker> decode_end_txn_marker(std::span<const std::byte> value) {
  if (value.size() < kEndTxnMarkerBytes) {
    return absl::DataLossError(fmt::format(
        "end transaction marker of {} bytes: at least {} needed", value.size(),
        kEndTxnMarkerBytes));
  }
  const auto version = load_be<int16_t>(value, 0);
  if (version < 0) {
    return absl::DataLossError(fmt::format("end transaction marker version {}", version));
  }
  return EndTxnMarker{version, load_be<int32_t>(value, 2)};
}

io::Buffer encode_control_record_key(const ControlRecordKey& key) {
  io::Buffer out = io::Buffer::allocate(kControlRecordKeyBytes);
  store_be(out.mutable_data(), key.version);
  store_be(out.mutable_data() + 2, static_cast<int16_t>(key.type));
  return out;
}

io::Buffer encode_end_txn_marker(const EndTxnMarker& marker) {
  io::Buffer out = io::Buffer::allocate(kEndTxnMarkerBytes);
  store_be(out.mutable_data(), marker.version);
  store_be(out.mutable_data() + 2, marker.coordinator_epoch);
  return out;
}

// --- building --------------------------------------------------------------------

namespace {

constexpr size_t kInt32Max = static_cast<size_t>(std::numeric_limits<int32_t>::max());

// Writes records into a buffer sized by the same arithmetic.
class RecordWriter {
 public:
  explicit RecordWriter(std::byte* out) : p_(out) {}
  std::byte* position() const { return p_; }

  void i8(int8_t v) { *p_++ = static_cast<std::byte>(v); }
  void varint(int32_t v) { p_ += codec::encode_varint(v, p_); }
  void varlong(int64_t v) { p_ += codec::encode_varlong(v, p_); }
  void bytes(std::span<const std::byte> b) {
    varint(static_cast<int32_t>(b.size()));
    if (!b.empty()) std::memcpy(p_, b.data(), b.size());
    p_ += b.size();
  }
  void nullable(const std::optional<io::Buffer>& b) {
    if (!b) {
      varint(-1);
    } else {
      bytes(b->span());
    }
  }

 private:
  std::byte* p_;
};

size_t nullable_size(const std::optional<io::Buffer>& b) {
  if (!b) return codec::size_of_varint(-1);
  return codec::size_of_varint(static_cast<int32_t>(b->size())) + b->size();
}

// The bytes after a record's length varint; 0 if a field is too long for
// the format (every real body is at least 6 bytes).
size_t record_body_size(const Record& r) {
  const auto too_long = [](const std::optional<io::Buffer>& b) {
    return b.has_value() && b->size() > kInt32Max;
  };
  if (too_long(r.key) || too_long(r.value) || r.headers.size() > kInt32Max) return 0;
  size_t n = 1 + codec::size_of_varlong(r.timestamp_delta) + codec::size_of_varint(r.offset_delta) +
             nullable_size(r.key) + nullable_size(r.value) +
             codec::size_of_varint(static_cast<int32_t>(r.headers.size()));
  for (const RecordHeader& h : r.headers) {
    if (h.key.size() > kInt32Max || too_long(h.value)) return 0;
    n += codec::size_of_varint(static_cast<int32_t>(h.key.size())) + h.key.size() +
         nullable_size(h.value);
  }
  return n;
}

void write_record(RecordWriter& w, const Record& r, size_t body) {
  std::byte* const start = w.position();
  w.varint(static_cast<int32_t>(body));
  std::byte* const body_start = w.position();
  w.i8(0);  // record attributes: unused by format v2
  w.varlong(r.timestamp_delta);
  w.varint(r.offset_delta);
  w.nullable(r.key);
  w.nullable(r.value);
  w.varint(static_cast<int32_t>(r.headers.size()));
  for (const RecordHeader& h : r.headers) {
    w.bytes(std::as_bytes(std::span(h.key.data(), h.key.size())));
    w.nullable(h.value);
  }
  BROOK_ASSERT_EQ(static_cast<size_t>(w.position() - body_start), body);
  BROOK_ASSERT(w.position() > start);
}

RecordBatchHeader header_for(const RecordBatchOptions& o, const std::vector<NewRecord>& records) {
  RecordBatchHeader h;
  h.base_offset = o.base_offset;
  h.partition_leader_epoch = o.partition_leader_epoch;
  h.attributes = static_cast<int16_t>(static_cast<int16_t>(o.compression) |
                                      (o.timestamp_type == TimestampType::kLogAppendTime
                                           ? kBatchTimestampTypeBit
                                           : 0) |
                                      (o.transactional ? kBatchTransactionalBit : 0) |
                                      (o.control ? kBatchControlBit : 0) |
                                      (o.delete_horizon_ms ? kBatchDeleteHorizonBit : 0));
  h.last_offset_delta = records.empty() ? 0 : static_cast<int32_t>(records.size() - 1);
  if (!records.empty()) {
    h.base_timestamp = records.front().timestamp_ms;
    h.max_timestamp = records.front().timestamp_ms;
    for (const NewRecord& r : records) h.max_timestamp = std::max(h.max_timestamp, r.timestamp_ms);
  }
  if (o.delete_horizon_ms) h.base_timestamp = *o.delete_horizon_ms;
  if (o.timestamp_type == TimestampType::kLogAppendTime) h.max_timestamp = o.log_append_time_ms;
  h.producer_id = o.producer_id;
  h.producer_epoch = o.producer_epoch;
  h.base_sequence = o.base_sequence;
  h.records_count = static_cast<int32_t>(records.size());
  return h;
}

// The encoded records, written at `offset` of a fresh buffer of `offset` +
// records bytes (the header goes before them).
absl::StatusOr<io::Buffer> encode_records(std::span<const Record> records, size_t offset) {
  std::vector<size_t> bodies(records.size());
  size_t total = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    bodies[i] = record_body_size(records[i]);
    if (bodies[i] == 0 || bodies[i] > kInt32Max) {
      return absl::InvalidArgumentError(fmt::format("record {} is too large for a batch", i));
    }
    total += codec::size_of_varint(static_cast<int32_t>(bodies[i])) + bodies[i];
    if (total > kInt32Max) {
      return absl::InvalidArgumentError("records are too large for one batch (2 GiB)");
    }
  }
  io::Buffer out = io::Buffer::allocate(offset + total);
  RecordWriter w(out.mutable_data() + offset);
  for (size_t i = 0; i < records.size(); ++i) write_record(w, records[i], bodies[i]);
  BROOK_ASSERT(w.position() == out.mutable_data() + out.size());
  return out;
}

}  // namespace

absl::StatusOr<io::Buffer> encode_batch(RecordBatchHeader h, std::span<const Record> records,
                                        int compression_level) {
  absl::StatusOr<codec::Compression> compression = codec::compression_from_attributes(h.attributes);
  if (!compression.ok()) return absl::InvalidArgumentError(compression.status().message());
  if (records.size() > kInt32Max) {
    return absl::InvalidArgumentError(fmt::format("{} records in one batch", records.size()));
  }
  h.records_count = static_cast<int32_t>(records.size());
  const bool compressed = *compression != codec::Compression::kNone;
  absl::StatusOr<io::Buffer> batch = encode_records(records, compressed ? 0 : kBatchHeaderBytes);
  if (!batch.ok()) return batch.status();
  if (compressed) {
    absl::StatusOr<io::Buffer> payload =
        codec::compress(*compression, batch->span(), compression_level);
    if (!payload.ok()) return payload.status();
    io::Buffer whole = io::Buffer::allocate(kBatchHeaderBytes + payload->size());
    std::memcpy(whole.mutable_data() + kBatchHeaderBytes, payload->data(), payload->size());
    batch = std::move(whole);
  }
  if (batch->size() - kBatchLogOverheadBytes > kInt32Max) {
    return absl::InvalidArgumentError("batch larger than 2 GiB");
  }
  h.batch_length = static_cast<int32_t>(batch->size() - kBatchLogOverheadBytes);
  write_header_fields(h, batch->mutable_data());
  h.crc = compute_batch_crc(batch->span());
  store_be(batch->mutable_data() + kBatchCrcOffset, h.crc);
  return batch;
}

absl::StatusOr<io::Buffer> RecordBatchBuilder::build() const {
  if (static_cast<int>(options_.compression) > static_cast<int>(codec::Compression::kZstd)) {
    return absl::InvalidArgumentError(fmt::format("unknown compression codec id {}",
                                                  static_cast<int>(options_.compression)));
  }
  if (records_.size() > kInt32Max) {
    return absl::InvalidArgumentError(fmt::format("{} records in one batch", records_.size()));
  }
  const RecordBatchHeader h = header_for(options_, records_);
  // Consecutive offset deltas; timestamps relative to the batch's base.
  std::vector<Record> records(records_.size());
  for (size_t i = 0; i < records_.size(); ++i) {
    records[i].timestamp_delta = wrapping_sub(records_[i].timestamp_ms, h.base_timestamp);
    records[i].offset_delta = static_cast<int32_t>(i);
    records[i].key = records_[i].key;
    records[i].value = records_[i].value;
    records[i].headers = records_[i].headers;
  }
  return encode_batch(h, records, options_.compression_level);
}

io::Buffer build_txn_marker_batch(const TxnMarkerBatch& marker) {
  BROOK_ASSERT(marker.type == ControlRecordType::kAbort ||
               marker.type == ControlRecordType::kCommit);
  RecordBatchOptions options;
  options.base_offset = marker.base_offset;
  options.partition_leader_epoch = marker.partition_leader_epoch;
  options.producer_id = marker.producer_id;
  options.producer_epoch = marker.producer_epoch;
  options.base_sequence = kNoSequence;
  options.transactional = true;
  options.control = true;
  RecordBatchBuilder builder(options);
  builder.append(NewRecord{
      .timestamp_ms = marker.timestamp_ms,
      .key = encode_control_record_key({kControlRecordKeyVersion, marker.type}),
      .value = encode_end_txn_marker({kEndTxnMarkerVersion, marker.coordinator_epoch}),
      .headers = {},
  });
  absl::StatusOr<io::Buffer> batch = builder.build();
  BROOK_ASSERT(batch.ok());  // an uncompressed one-record batch always fits
  return *std::move(batch);
}

}  // namespace brook::net
