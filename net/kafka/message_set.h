// net/kafka/message_set.h
//
// Message sets: Kafka's message formats 0 and 1, from before record batches
// (KIP-98). Produce v0-2 carries them and Fetch v0-3 answers with them;
// Brook stores record batches only, so a broker converts both ways, as
// Kafka 3's did (up-conversion on produce, down-conversion on fetch).
//
// A message set is a sequence of entries:
//
//   offset int64, message_size int32, then the message:
//   crc uint32 (CRC-32, the IEEE polynomial, of the rest of the message),
//   magic int8 (0 or 1), attributes int8 (bits 0-2: the codec; bit 3, magic
//   1: LogAppendTime), timestamp int64 (magic 1 only), key and value
//   (int32 length, -1 for null, then the bytes).
//
// A compressed message (a "wrapper") holds, as its value, one compressed
// message set of the real messages (gzip, snappy or lz4; zstd needs record
// batches). Inner messages of a magic 1 wrapper number their offsets from 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "io/buffer.h"

namespace brook::net {

inline constexpr size_t kMessageSetLogOverhead = 12;  // offset + message_size

// The records of a message set as one v2 record batch, as a producer of
// that batch would have sent it: records in order, with the messages'
// timestamps (magic 0 has none: -1) and keys and values, CreateTime, no
// producer id, compressed with the codec of the first compressed message
// (uncompressed when there is none). Offsets are left for the log to
// assign. `max_uncompressed_bytes` caps what a wrapper may decompress to.
//
// DataLoss (Kafka's CORRUPT_MESSAGE) for anything malformed: a CRC that does
// not match, a truncated or trailing partial message, a magic other than 0
// or 1, a size field that disagrees with the fields, a wrapper holding
// another compressed message or an inner magic other than its own, zstd, an
// empty set. ResourceExhausted past the cap.
absl::StatusOr<io::Buffer> message_set_to_batch(std::span<const std::byte> set, size_t max_uncompressed_bytes);

// The records of `batches` (whole v2 record batches, as a fetch reads them;
// a partial batch at the end is dropped) from offset `from` on, as a
// message set of `magic` (0 or 1): one uncompressed message per record,
// with its absolute offset; magic 1 messages carry the record's timestamp
// (a LogAppendTime batch's marks its messages so). Control batches and
// headers have no place in these formats and are left out.
// DataLoss for a malformed batch; ResourceExhausted when a batch would
// decompress past `max_uncompressed_bytes`.
absl::StatusOr<io::Buffer> batches_to_message_set(const io::Buffer& batches, int64_t from, int8_t magic,
                                                  size_t max_uncompressed_bytes);

// Appends one uncompressed or wrapper message as an entry of a message set
// (`timestamp` is written for magic 1 only), its CRC computed.
void append_message_set_entry(std::string& out, int64_t offset, int8_t magic, int8_t attributes, int64_t timestamp,
                              const std::optional<io::Buffer>& key, const std::optional<io::Buffer>& value);

}  // namespace brook::net
