// net/kafka/message_set.cc
#include "net/kafka/message_set.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "net/codec/compression.h"
#include "net/codec/endian.h"
#include "net/kafka/record_batch.h"

namespace brook::net {

namespace {

constexpr int8_t kMagic0 = 0;
constexpr int8_t kMagic1 = 1;
constexpr size_t kCrcBytes = 4;
// crc, magic, attributes, key length, value length (+ timestamp for magic 1).
constexpr size_t kMessageMinBytesV0 = kCrcBytes + 1 + 1 + 4 + 4;
constexpr size_t kMessageMinBytesV1 = kMessageMinBytesV0 + 8;
constexpr int8_t kMessageTimestampTypeBit = 1 << 3;

uint32_t crc32_ieee(std::span<const std::byte> bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  // zlib takes lengths as uInt: feed it in pieces.
  size_t done = 0;
  while (done < bytes.size()) {
    const size_t n = std::min<size_t>(bytes.size() - done, 1u << 30);
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), static_cast<uInt>(n));
    done += n;
  }
  return static_cast<uint32_t>(crc);
}

struct Message {
  int64_t offset = 0;
  int8_t magic = 0;
  int8_t attributes = 0;
  int64_t timestamp = kNoTimestamp;
  std::optional<io::Buffer> key;
  std::optional<io::Buffer> value;
};

absl::Status corrupt(std::string what) { return absl::DataLossError("message set: " + what); }

// Reads a length-prefixed byte field at `*at` of `m`; nullopt for -1.
absl::StatusOr<std::optional<io::Buffer>> read_bytes(const io::Buffer& m, size_t* at, const char* name) {
  if (*at + 4 > m.size()) return corrupt(fmt::format("the {} length runs past the message", name));
  const int32_t length = codec::load_be<int32_t>(m.span(), *at);
  *at += 4;
  if (length == -1) return std::optional<io::Buffer>();
  if (length < 0 || static_cast<size_t>(length) > m.size() - *at) {
    return corrupt(fmt::format("{} length {} does not fit the message", name, length));
  }
  io::Buffer out = m.slice(*at, static_cast<size_t>(length));
  *at += static_cast<size_t>(length);
  return std::optional<io::Buffer>(std::move(out));
}

// Parses every entry of `set`. A partial entry at the end is an error.
absl::StatusOr<std::vector<Message>> parse_entries(const io::Buffer& set) {
  std::vector<Message> out;
  size_t pos = 0;
  const std::span<const std::byte> bytes = set.span();
  while (pos < bytes.size()) {
    if (bytes.size() - pos < kMessageSetLogOverhead) {
      return corrupt(fmt::format("{} bytes at the end are no whole entry", bytes.size() - pos));
    }
    Message msg;
    msg.offset = codec::load_be<int64_t>(bytes, pos);
    const int32_t size = codec::load_be<int32_t>(bytes, pos + 8);
    pos += kMessageSetLogOverhead;
    if (size < static_cast<int32_t>(kMessageMinBytesV0) || static_cast<size_t>(size) > bytes.size() - pos) {
      return corrupt(fmt::format("message size {} at offset {} does not fit", size, msg.offset));
    }
    const io::Buffer m = set.slice(pos, static_cast<size_t>(size));
    pos += static_cast<size_t>(size);
    const uint32_t crc = codec::load_be<uint32_t>(m.span(), 0);
    if (crc32_ieee(m.span().subspan(kCrcBytes)) != crc) {
      return corrupt(fmt::format("the CRC of the message at offset {} does not match", msg.offset));
    }
    msg.magic = static_cast<int8_t>(m.span()[4]);
    msg.attributes = static_cast<int8_t>(m.span()[5]);
    size_t at = 6;
    if (msg.magic == kMagic1) {
      if (m.size() < kMessageMinBytesV1) return corrupt("a magic 1 message shorter than its fields");
      msg.timestamp = codec::load_be<int64_t>(m.span(), at);
      at += 8;
    } else if (msg.magic != kMagic0) {
      return corrupt(fmt::format("magic {} in a message set (record batches are magic 2)", msg.magic));
    }
    absl::StatusOr<std::optional<io::Buffer>> key = read_bytes(m, &at, "key");
    if (!key.ok()) return key.status();
    absl::StatusOr<std::optional<io::Buffer>> value = read_bytes(m, &at, "value");
    if (!value.ok()) return value.status();
    if (at != m.size()) return corrupt(fmt::format("{} bytes past the value of a message", m.size() - at));
    msg.key = *std::move(key);
    msg.value = *std::move(value);
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace

void append_message_set_entry(std::string& out, int64_t offset, int8_t magic, int8_t attributes, int64_t timestamp,
                    const std::optional<io::Buffer>& key, const std::optional<io::Buffer>& value) {
  const size_t key_bytes = key.has_value() ? key->size() : 0;
  const size_t value_bytes = value.has_value() ? value->size() : 0;
  const size_t size = (magic == kMagic1 ? kMessageMinBytesV1 : kMessageMinBytesV0) + key_bytes + value_bytes;
  const size_t start = out.size();
  out.resize(start + kMessageSetLogOverhead + size);
  std::byte* p = reinterpret_cast<std::byte*>(out.data() + start);
  codec::store_be<int64_t>(p, offset);
  codec::store_be<int32_t>(p + 8, static_cast<int32_t>(size));
  std::byte* m = p + kMessageSetLogOverhead;
  size_t at = kCrcBytes;
  m[at++] = static_cast<std::byte>(magic);
  m[at++] = static_cast<std::byte>(attributes);
  if (magic == kMagic1) {
    codec::store_be<int64_t>(m + at, timestamp);
    at += 8;
  }
  for (const std::optional<io::Buffer>* field : {&key, &value}) {
    if (!field->has_value()) {
      codec::store_be<int32_t>(m + at, -1);
      at += 4;
      continue;
    }
    codec::store_be<int32_t>(m + at, static_cast<int32_t>((*field)->size()));
    at += 4;
    if ((*field)->size() > 0) std::memcpy(m + at, (*field)->data(), (*field)->size());
    at += (*field)->size();
  }
  codec::store_be<uint32_t>(m, crc32_ieee(std::span<const std::byte>(m + kCrcBytes, size - kCrcBytes)));
}

absl::StatusOr<io::Buffer> message_set_to_batch(std::span<const std::byte> set, size_t max_uncompressed_bytes) {
  if (set.empty()) return corrupt("no messages");
  absl::StatusOr<std::vector<Message>> outer = parse_entries(io::Buffer::copy_of(set));
  if (!outer.ok()) return outer.status();
  RecordBatchOptions options;
  std::optional<codec::Compression> compression;
  std::vector<NewRecord> records;
  size_t uncompressed = 0;
  auto add = [&](Message& m, int64_t timestamp) {
    NewRecord r;
    r.timestamp_ms = m.magic == kMagic0 ? kNoTimestamp : timestamp;
    r.key = std::move(m.key);
    r.value = std::move(m.value);
    records.push_back(std::move(r));
  };
  for (Message& m : *outer) {
    const auto codec_id = static_cast<codec::Compression>(m.attributes & codec::kCompressionAttributeMask);
    if (codec_id == codec::Compression::kNone) {
      add(m, m.timestamp);
      continue;
    }
    if (codec_id != codec::Compression::kGzip && codec_id != codec::Compression::kSnappy &&
        codec_id != codec::Compression::kLz4) {
      return corrupt(fmt::format("codec {} in a magic {} message", static_cast<int>(codec_id), m.magic));
    }
    if (!m.value.has_value()) return corrupt("a compressed message without a value");
    if (!compression.has_value()) compression = codec_id;
    const size_t room = max_uncompressed_bytes > uncompressed ? max_uncompressed_bytes - uncompressed : 0;
    absl::StatusOr<io::Buffer> inner_bytes = codec::decompress(codec_id, m.value->span(), room);
    if (!inner_bytes.ok()) {
      if (absl::IsResourceExhausted(inner_bytes.status())) return inner_bytes.status();
      return corrupt(std::string(inner_bytes.status().message()));
    }
    uncompressed += inner_bytes->size();
    absl::StatusOr<std::vector<Message>> inner = parse_entries(*inner_bytes);
    if (!inner.ok()) return inner.status();
    if (inner->empty()) return corrupt("a compressed message with no messages inside");
    const bool log_append_time = m.magic == kMagic1 && (m.attributes & kMessageTimestampTypeBit) != 0;
    for (Message& i : *inner) {
      if (i.magic != m.magic) return corrupt(fmt::format("magic {} inside a magic {} message", i.magic, m.magic));
      if ((i.attributes & codec::kCompressionAttributeMask) != 0) return corrupt("a compressed message inside another");
      add(i, log_append_time ? m.timestamp : i.timestamp);
    }
  }
  options.compression = compression.value_or(codec::Compression::kNone);
  RecordBatchBuilder builder(options);
  for (NewRecord& r : records) builder.append(std::move(r));
  return builder.build();
}

absl::StatusOr<io::Buffer> batches_to_message_set(const io::Buffer& batches, int64_t from, int8_t magic,
                                                  size_t max_uncompressed_bytes) {
  std::string out;
  BatchIteratorOptions options;
  options.crc = CrcCheck::kSkip;  // written by this broker's log, checked on the way in
  BatchIterator it(batches, options);
  while (true) {
    absl::StatusOr<std::optional<BatchView>> next = it.next();
    if (!next.ok()) return next.status();
    if (!next->has_value()) break;
    const RecordBatchHeader& h = (*next)->header;
    if (h.is_control() || h.records_count == 0 || h.last_offset() < from) continue;
    absl::StatusOr<std::vector<Record>> records = decode_records((*next)->bytes, max_uncompressed_bytes);
    if (!records.ok()) return records.status();
    const int8_t attributes =
        magic == kMagic1 && h.timestamp_type() == TimestampType::kLogAppendTime ? kMessageTimestampTypeBit : 0;
    for (const Record& r : *records) {
      const int64_t offset = record_offset(h, r);
      if (offset < from) continue;
      append_message_set_entry(out, offset, magic, attributes, record_timestamp(h, r), r.key, r.value);
    }
  }
  return io::Buffer::copy_of(std::string_view(out));
}

}  // namespace brook::net
