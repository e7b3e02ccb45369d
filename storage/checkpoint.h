// storage/checkpoint.h
//
// The small metadata files of a log directory, byte for byte in Kafka's
// formats, and the one durable way Brook replaces a whole file.
//
// Durable replacement. write_file_atomically() writes `<path>.tmp`, datasyncs
// and closes it, renames it over `<path>`, then syncs the parent directory.
// A crash at any point leaves either the old or the new contents under
// `<path>` (never a mix, never nothing when there was a file before); once the
// call returns OK the new contents survive any crash. A failed or interrupted
// call may leave a stale `<path>.tmp` behind; the next write overwrites it,
// and readers never look at it. This is Kafka's CheckpointFile discipline
// (temporary file, fsync, atomic move, directory fsync).
//
// Offset checkpoints (Kafka's OffsetCheckpointFile; one per log directory:
// `recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
// `log-start-offset-checkpoint`, `cleaner-offset-checkpoint`). Text, every
// line ending in "\n":
//
//   0                      version (kOffsetCheckpointVersion)
//   <count>                number of entry lines that follow
//   <topic> <partition> <offset>     one line per partition, single spaces
//
// Kafka's generic checkpoint layout (its CheckpointFile: version line, count
// line, entry lines) is shared with `leader-epoch-checkpoint`
// (storage/leader_epoch.h); decode_checkpoint_lines() checks the first two
// lines and splits the rest. A file of zero bytes decodes as no entries:
// Kafka creates checkpoint files empty before their first write.
//
// Partition metadata (`partition.metadata` in each partition directory;
// Kafka's PartitionMetadataFile, KIP-516):
//
//   version: 0\ntopic_id: <topic id as 22 characters of base64url, no padding>
//
// Kafka writes no line end after the topic id; a reader accepts one. A version
// above 0 is accepted (Kafka's downgrade rule) and its later lines ignored;
// the all-zero topic id is rejected.
//
// Errors. A malformed file is DataLoss naming the file (in the read_*
// functions) and the 1-based line; a missing file is not an error: offset
// checkpoints read as empty, partition metadata and read_whole_file as
// nullopt. Disk errors pass through with the file named.
//
// All functions are pure except the io::Task ones, which touch only the Disk
// they are given. Values are plain single-loop data.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/disk.h"
#include "io/task.h"
#include "net/kafka/wire.h"

namespace brook::storage {

// A partition of a topic. Ordered by topic, then partition; formats as
// "topic-partition", as Kafka prints it (and names partition directories).
struct TopicPartition {
  std::string topic;
  int32_t partition = 0;

  auto operator<=>(const TopicPartition&) const = default;
  bool operator==(const TopicPartition&) const = default;
};

// Kafka's legal topic names: 1 to 249 characters of [a-zA-Z0-9._-], not "."
// or "..".
inline constexpr size_t kTopicNameBytesMax = 249;
bool is_legal_topic_name(std::string_view topic);

// --- Durable whole-file replacement ---------------------------------------

inline constexpr std::string_view kTempFileSuffix = ".tmp";
// Largest file read_whole_file() reads by default. Checkpoint files are a few
// dozen bytes per partition; this allows over a million partitions.
inline constexpr size_t kWholeFileBytesMax = size_t{64} << 20;

// The parent directory of a Disk path: "a/b/c" -> "a/b", "c" -> "" (the root).
std::string parent_dir(std::string_view path);

// Replaces the contents of `path` durably and atomically (see the header
// comment). The parent directory must exist.
io::Task<absl::Status> write_file_atomically(io::Disk& disk, std::string path, io::Buffer contents);

// The whole contents of `path`, or nullopt when it does not exist.
// OutOfRange when it is larger than `bytes_max`.
io::Task<absl::StatusOr<std::optional<io::Buffer>>> read_whole_file(
    io::Disk& disk, std::string path, size_t bytes_max = kWholeFileBytesMax);
// The same, believed only when two reads in a row return the same bytes:
// a disk that corrupts a read once must not change what a small file says
// (a digit of a checkpoint line reads as well as the true one). Failed
// reads are retried; DataLoss when no two reads agree within a few tries.
io::Task<absl::StatusOr<std::optional<io::Buffer>>> read_whole_file_agreed(
    io::Disk& disk, std::string path, size_t bytes_max = kWholeFileBytesMax);

// --- Kafka's checkpoint text layout ----------------------------------------

// One entry line of a checkpoint file: its text (without the "\n") and its
// 1-based line number in the file, for error messages.
struct CheckpointLine {
  int64_t line_number = 0;
  std::string_view text;
};

// Checks the version line (must equal `version`) and the count line (must
// equal the number of entry lines) and returns the entry lines, views into
// `text`. Zero bytes decode as no lines. DataLoss on anything else: a bad
// number, another version, a count mismatch, a line without "\n".
absl::StatusOr<std::vector<CheckpointLine>> decode_checkpoint_lines(std::string_view text,
                                                                    int32_t version);

// Strict decimal integers: an optional '-' then digits, the whole text, in
// range. Nothing else (no '+', no spaces).
std::optional<int64_t> parse_decimal_int64(std::string_view text);
std::optional<int32_t> parse_decimal_int32(std::string_view text);

// Prefixes a non-OK status's message with the file it concerns, keeping the
// code: "<path>: <message>".
absl::Status annotate_with_path(const absl::Status& status, std::string_view path);

// --- Offset checkpoints ----------------------------------------------------

inline constexpr int32_t kOffsetCheckpointVersion = 0;
inline constexpr std::string_view kRecoveryPointCheckpointFileName =
    "recovery-point-offset-checkpoint";
inline constexpr std::string_view kReplicationOffsetCheckpointFileName =
    "replication-offset-checkpoint";
inline constexpr std::string_view kLogStartOffsetCheckpointFileName = "log-start-offset-checkpoint";
inline constexpr std::string_view kCleanerOffsetCheckpointFileName = "cleaner-offset-checkpoint";

using OffsetCheckpoint = std::map<TopicPartition, int64_t>;

// REQUIRES: every topic is a legal topic name; every partition is >= 0.
io::Buffer encode_offset_checkpoint(const OffsetCheckpoint& offsets);
// DataLoss on a malformed file, an illegal topic name, a negative partition
// or a partition listed twice.
absl::StatusOr<OffsetCheckpoint> decode_offset_checkpoint(std::string_view text);

// A missing file reads as no entries.
io::Task<absl::StatusOr<OffsetCheckpoint>> read_offset_checkpoint(io::Disk& disk, std::string path);
// REQUIRES: as encode_offset_checkpoint.
io::Task<absl::Status> write_offset_checkpoint(io::Disk& disk, std::string path,
                                               OffsetCheckpoint offsets);

// --- partition.metadata ----------------------------------------------------

inline constexpr int32_t kPartitionMetadataVersion = 0;
inline constexpr std::string_view kPartitionMetadataFileName = "partition.metadata";
// A Kafka UUID in text: 16 bytes as unpadded base64url.
inline constexpr size_t kUuidTextBytes = 22;

// Kafka's Uuid.fromString for the canonical form net::Uuid::to_string()
// writes: exactly 22 base64url characters whose unused low bits are zero.
std::optional<net::Uuid> parse_uuid(std::string_view text);

// REQUIRES: !topic_id.is_zero().
io::Buffer encode_partition_metadata(const net::Uuid& topic_id);
// The topic id. DataLoss on a malformed file or the zero id.
absl::StatusOr<net::Uuid> decode_partition_metadata(std::string_view text);

// nullopt when the file does not exist.
io::Task<absl::StatusOr<std::optional<net::Uuid>>> read_partition_metadata(io::Disk& disk,
                                                                           std::string path);
// REQUIRES: !topic_id.is_zero().
io::Task<absl::Status> write_partition_metadata(io::Disk& disk, std::string path,
                                                net::Uuid topic_id);

}  // namespace brook::storage

template <>
struct fmt::formatter<brook::storage::TopicPartition> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const brook::storage::TopicPartition& tp, FormatContext& ctx) const {
    return fmt::format_to(ctx.out(), "{}-{}", tp.topic, tp.partition);
  }
};
