// storage/checkpoint.cc
#include "storage/checkpoint.h"

#include <array>
#include <charconv>
#include <limits>
#include <memory>
#include <utility>

#include "io/assert.h"
#include "io/status.h"

namespace brook::storage {

namespace {

bool is_topic_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

absl::Status malformed(int64_t line_number, std::string_view what) {
  return absl::DataLossError(fmt::format("line {}: {}", line_number, what));
}

// The text of line `line_number`, shortened for an error message.
std::string quoted(std::string_view line) {
  constexpr size_t kQuotedBytesMax = 80;
  if (line.size() <= kQuotedBytesMax) return fmt::format("'{}'", line);
  return fmt::format("'{}...'", line.substr(0, kQuotedBytesMax));
}

// Splits `text` at single spaces into exactly `fields.size()` non-empty
// fields; false otherwise.
template <size_t N>
bool split_fields(std::string_view text, std::array<std::string_view, N>& fields) {
  for (size_t i = 0; i < N; ++i) {
    const size_t space = text.find(' ');
    const bool last = i + 1 == N;
    if (last != (space == std::string_view::npos)) return false;
    fields[i] = last ? text : text.substr(0, space);
    if (fields[i].empty()) return false;
    if (!last) text.remove_prefix(space + 1);
  }
  return true;
}

// The next "\n"-terminated line of `rest`, advancing past it; nullopt when
// `rest` has no line end left.
std::optional<std::string_view> next_line(std::string_view& rest) {
  const size_t end = rest.find('\n');
  if (end == std::string_view::npos) return std::nullopt;
  std::string_view line = rest.substr(0, end);
  rest.remove_prefix(end + 1);
  return line;
}

// The 6-bit value of a base64url character, or -1.
int base64url_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

absl::StatusOr<std::pair<TopicPartition, int64_t>> decode_offset_entry(const CheckpointLine& line) {
  std::array<std::string_view, 3> fields;
  if (!split_fields(line.text, fields)) {
    return malformed(
        line.line_number,
        fmt::format("expected '<topic> <partition> <offset>', got {}", quoted(line.text)));
  }
  if (!is_legal_topic_name(fields[0])) {
    return malformed(line.line_number, fmt::format("illegal topic name {}", quoted(fields[0])));
  }
  const std::optional<int32_t> partition = parse_decimal_int32(fields[1]);
  if (!partition.has_value() || *partition < 0) {
    return malformed(line.line_number, fmt::format("bad partition {}", quoted(fields[1])));
  }
  const std::optional<int64_t> offset = parse_decimal_int64(fields[2]);
  if (!offset.has_value()) {
    return malformed(line.line_number, fmt::format("bad offset {}", quoted(fields[2])));
  }
  return std::pair{TopicPartition{std::string(fields[0]), *partition}, *offset};
}

// Parses "<key>: <value>" and returns the value.
absl::StatusOr<std::string_view> keyed_value(std::optional<std::string_view> line,
                                             int64_t line_number, std::string_view key) {
  if (!line.has_value()) {
    return malformed(line_number, fmt::format("missing '{}: ' line", key));
  }
  if (line->size() <= key.size() + 2 || line->substr(0, key.size()) != key ||
      line->substr(key.size(), 2) != ": ") {
    return malformed(line_number,
                     fmt::format("expected '{}: <value>', got {}", key, quoted(*line)));
  }
  return line->substr(key.size() + 2);
}

}  // namespace

bool is_legal_topic_name(std::string_view topic) {
  if (topic.empty() || topic.size() > kTopicNameBytesMax) return false;
  if (topic == "." || topic == "..") return false;
  for (char c : topic) {
    if (!is_topic_char(c)) return false;
  }
  return true;
}

std::string parent_dir(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return "";
  return std::string(path.substr(0, slash));
}

// --- Durable whole-file replacement ---------------------------------------

namespace {

// Makes the open temporary file hold exactly `contents`, durably.
io::Task<absl::Status> fill_and_sync(io::File& file, io::Buffer contents) {
  // A stale temporary file from an interrupted write may be longer.
  if (file.size() != 0) CO_RETURN_IF_ERROR(co_await file.truncate(0));
  const size_t size = contents.size();
  if (size != 0) {
    CO_RETURN_IF_ERROR(co_await file.write_at(0, io::BufferChain(std::move(contents))));
  }
  BROOK_ASSERT_EQ(file.size(), size);
  CO_RETURN_IF_ERROR(co_await file.datasync());
  co_return absl::OkStatus();
}

io::Task<absl::Status> write_file_atomically_impl(io::Disk& disk, std::string path,
                                                  io::Buffer contents) {
  CO_RETURN_IF_ERROR(io::validate_disk_path(path));
  if (path.empty()) co_return absl::InvalidArgumentError("the root is not a file");
  const std::string temp_path = path + std::string(kTempFileSuffix);
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> file,
                      co_await disk.open(temp_path, io::OpenMode::kCreate));
  const absl::Status filled = co_await fill_and_sync(*file, std::move(contents));
  const absl::Status closed = co_await file->close();
  CO_RETURN_IF_ERROR(filled);
  CO_RETURN_IF_ERROR(closed);
  // The new bytes are durable under the temporary name; the rename publishes
  // them in one step and the directory sync makes the rename durable.
  CO_RETURN_IF_ERROR(co_await disk.rename(temp_path, path));
  CO_RETURN_IF_ERROR(co_await disk.sync_dir(parent_dir(path)));
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<std::optional<io::Buffer>>> read_whole_file_impl(io::Disk& disk,
                                                                         std::string path,
                                                                         size_t bytes_max) {
  absl::StatusOr<std::unique_ptr<io::File>> opened =
      co_await disk.open(path, io::OpenMode::kReadOnly);
  if (absl::IsNotFound(opened.status())) co_return std::optional<io::Buffer>();
  if (!opened.ok()) co_return opened.status();
  std::unique_ptr<io::File> file = std::move(*opened);
  const uint64_t size = file->size();
  if (size > bytes_max) {
    // Already failing; the close status adds nothing.
    (void)co_await file->close();
    co_return absl::OutOfRangeError(
        fmt::format("{} bytes, more than the {} allowed", size, bytes_max));
  }
  absl::StatusOr<io::Buffer> bytes = co_await file->read_at(0, static_cast<size_t>(size));
  const absl::Status closed = co_await file->close();
  if (!bytes.ok()) co_return bytes.status();
  CO_RETURN_IF_ERROR(closed);
  // Reads are short only at the end of the file, whose size we hold.
  if (bytes->size() != size) {
    co_return absl::InternalError(fmt::format("short read: {} of {} bytes", bytes->size(), size));
  }
  co_return std::optional<io::Buffer>(std::move(*bytes));
}

}  // namespace

io::Task<absl::Status> write_file_atomically(io::Disk& disk, std::string path,
                                             io::Buffer contents) {
  const absl::Status status = co_await write_file_atomically_impl(disk, path, std::move(contents));
  co_return annotate_with_path(status, path);
}

io::Task<absl::StatusOr<std::optional<io::Buffer>>> read_whole_file(io::Disk& disk,
                                                                    std::string path,
                                                                    size_t bytes_max) {
  absl::StatusOr<std::optional<io::Buffer>> result =
      co_await read_whole_file_impl(disk, path, bytes_max);
  if (!result.ok()) co_return annotate_with_path(result.status(), path);
  co_return result;
}

io::Task<absl::StatusOr<std::optional<io::Buffer>>> read_whole_file_agreed(io::Disk& disk,
                                                                           std::string path,
                                                                           size_t bytes_max) {
  constexpr int kAttemptsMax = 6;
  std::optional<std::optional<io::Buffer>> previous;
  absl::Status last_error;
  for (int attempt = 0; attempt < kAttemptsMax; ++attempt) {
    absl::StatusOr<std::optional<io::Buffer>> bytes = co_await read_whole_file(disk, path, bytes_max);
    if (!bytes.ok()) {
      if (absl::IsOutOfRange(bytes.status())) co_return bytes.status();
      last_error = bytes.status();
      previous.reset();
      continue;
    }
    const bool same = previous.has_value() && previous->has_value() == bytes->has_value() &&
                      (!bytes->has_value() || (*previous)->view() == (*bytes)->view());
    if (same) co_return std::move(*bytes);
    previous = std::move(*bytes);
  }
  if (!last_error.ok()) co_return last_error;
  co_return absl::DataLossError(fmt::format("{}: reads of the file disagree", path));
}

// --- Kafka's checkpoint text layout ----------------------------------------

absl::StatusOr<std::vector<CheckpointLine>> decode_checkpoint_lines(std::string_view text,
                                                                    int32_t version) {
  std::vector<CheckpointLine> lines;
  if (text.empty()) return lines;
  std::string_view rest = text;
  const std::optional<std::string_view> version_line = next_line(rest);
  if (!version_line.has_value()) return malformed(1, "no line end after the version");
  const std::optional<int32_t> read_version = parse_decimal_int32(*version_line);
  if (!read_version.has_value()) {
    return malformed(1, fmt::format("bad version {}", quoted(*version_line)));
  }
  if (*read_version != version) {
    return malformed(1, fmt::format("unknown version {}, expected {}", *read_version, version));
  }
  const std::optional<std::string_view> count_line = next_line(rest);
  if (!count_line.has_value()) return malformed(2, "missing entry count (truncated file)");
  const std::optional<int32_t> count = parse_decimal_int32(*count_line);
  if (!count.has_value() || *count < 0) {
    return malformed(2, fmt::format("bad entry count {}", quoted(*count_line)));
  }
  int64_t line_number = 3;
  while (!rest.empty()) {
    const std::optional<std::string_view> line = next_line(rest);
    if (!line.has_value()) {
      return malformed(line_number, "no line end (truncated file or trailing bytes)");
    }
    if (std::cmp_greater_equal(lines.size(), *count)) {
      return malformed(line_number, fmt::format("more entries than the count {}", *count));
    }
    lines.push_back(CheckpointLine{line_number, *line});
    ++line_number;
  }
  if (std::cmp_not_equal(lines.size(), *count)) {
    return malformed(line_number,
                     fmt::format("expected {} entries, found {}", *count, lines.size()));
  }
  return lines;
}

std::optional<int64_t> parse_decimal_int64(std::string_view text) {
  if (text.empty() || text.front() == '+') return std::nullopt;
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const std::from_chars_result r = std::from_chars(text.data(), end, value, 10);
  if (r.ec != std::errc() || r.ptr != end) return std::nullopt;
  return value;
}

std::optional<int32_t> parse_decimal_int32(std::string_view text) {
  const std::optional<int64_t> value = parse_decimal_int64(text);
  if (!value.has_value() || *value < std::numeric_limits<int32_t>::min() ||
      *value > std::numeric_limits<int32_t>::max()) {
    return std::nullopt;
  }
  return static_cast<int32_t>(*value);
}

absl::Status annotate_with_path(const absl::Status& status, std::string_view path) {
  if (status.ok()) return status;
  return absl::Status(status.code(), fmt::format("{}: {}", path, std::string(status.message())));
}

// --- Offset checkpoints ----------------------------------------------------

io::Buffer encode_offset_checkpoint(const OffsetCheckpoint& offsets) {
  std::string text = fmt::format("{}\n{}\n", kOffsetCheckpointVersion, offsets.size());
  for (const auto& [tp, offset] : offsets) {
    BROOK_ASSERT_MSG(is_legal_topic_name(tp.topic), "illegal topic name '{}'", tp.topic);
    BROOK_ASSERT_GE(tp.partition, 0);
    text += fmt::format("{} {} {}\n", tp.topic, tp.partition, offset);
  }
  return io::Buffer::copy_of(text);
}

absl::StatusOr<OffsetCheckpoint> decode_offset_checkpoint(std::string_view text) {
  absl::StatusOr<std::vector<CheckpointLine>> lines =
      decode_checkpoint_lines(text, kOffsetCheckpointVersion);
  if (!lines.ok()) return lines.status();
  OffsetCheckpoint offsets;
  for (const CheckpointLine& line : *lines) {
    absl::StatusOr<std::pair<TopicPartition, int64_t>> entry = decode_offset_entry(line);
    if (!entry.ok()) return entry.status();
    const std::string name = fmt::format("{}", entry->first);
    if (!offsets.insert(std::move(*entry)).second) {
      return malformed(line.line_number, fmt::format("partition {} listed twice", name));
    }
  }
  return offsets;
}

io::Task<absl::StatusOr<OffsetCheckpoint>> read_offset_checkpoint(io::Disk& disk,
                                                                  std::string path) {
  CO_ASSIGN_OR_RETURN(std::optional<io::Buffer> bytes, co_await read_whole_file_agreed(disk, path));
  if (!bytes.has_value()) co_return OffsetCheckpoint{};
  absl::StatusOr<OffsetCheckpoint> offsets = decode_offset_checkpoint(bytes->view());
  if (!offsets.ok()) co_return annotate_with_path(offsets.status(), path);
  co_return offsets;
}

io::Task<absl::Status> write_offset_checkpoint(io::Disk& disk, std::string path,
                                               OffsetCheckpoint offsets) {
  io::Buffer bytes = encode_offset_checkpoint(offsets);
  co_return co_await write_file_atomically(disk, std::move(path), std::move(bytes));
}

// --- partition.metadata ----------------------------------------------------

std::optional<net::Uuid> parse_uuid(std::string_view text) {
  if (text.size() != kUuidTextBytes) return std::nullopt;
  net::Uuid uuid;
  uint32_t acc = 0;
  int bits = 0;
  size_t out = 0;
  for (char c : text) {
    const int v = base64url_value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      BROOK_ASSERT_LT(out, uuid.bytes.size());
      uuid.bytes[out++] = static_cast<uint8_t>((acc >> bits) & 0xff);
    }
  }
  // 22 characters carry 132 bits: 16 bytes and 4 bits that must be zero.
  BROOK_ASSERT_EQ(out, uuid.bytes.size());
  BROOK_ASSERT_EQ(bits, 4);
  if ((acc & 0xf) != 0) return std::nullopt;
  return uuid;
}

io::Buffer encode_partition_metadata(const net::Uuid& topic_id) {
  BROOK_ASSERT(!topic_id.is_zero());
  const std::string id = topic_id.to_string();
  BROOK_ASSERT_EQ(id.size(), kUuidTextBytes);
  return io::Buffer::copy_of(
      fmt::format("version: {}\ntopic_id: {}", kPartitionMetadataVersion, id));
}

absl::StatusOr<net::Uuid> decode_partition_metadata(std::string_view text) {
  std::string_view rest = text;
  const std::optional<std::string_view> first = next_line(rest);
  ASSIGN_OR_RETURN(std::string_view version_text, keyed_value(first, 1, "version"));
  const std::optional<int32_t> version = parse_decimal_int32(version_text);
  if (!version.has_value() || *version < kPartitionMetadataVersion) {
    return malformed(1, fmt::format("bad version {}", quoted(version_text)));
  }
  // The last line may lack its "\n".
  std::optional<std::string_view> second = next_line(rest);
  if (!second.has_value() && !rest.empty()) second = std::exchange(rest, std::string_view());
  ASSIGN_OR_RETURN(std::string_view id_text, keyed_value(second, 2, "topic_id"));
  const std::optional<net::Uuid> id = parse_uuid(id_text);
  if (!id.has_value()) return malformed(2, fmt::format("bad topic id {}", quoted(id_text)));
  if (id->is_zero()) return malformed(2, "the zero topic id");
  // Version 0 has nothing more; later versions may add lines.
  if (*version == kPartitionMetadataVersion && !rest.empty()) {
    return malformed(3, fmt::format("trailing bytes {}", quoted(rest)));
  }
  return *id;
}

io::Task<absl::StatusOr<std::optional<net::Uuid>>> read_partition_metadata(io::Disk& disk,
                                                                           std::string path) {
  CO_ASSIGN_OR_RETURN(std::optional<io::Buffer> bytes, co_await read_whole_file_agreed(disk, path));
  if (!bytes.has_value()) co_return std::optional<net::Uuid>();
  absl::StatusOr<net::Uuid> id = decode_partition_metadata(bytes->view());
  if (!id.ok()) co_return annotate_with_path(id.status(), path);
  co_return std::optional<net::Uuid>(*id);
}

io::Task<absl::Status> write_partition_metadata(io::Disk& disk, std::string path,
                                                net::Uuid topic_id) {
  io::Buffer bytes = encode_partition_metadata(topic_id);
  co_return co_await write_file_atomically(disk, std::move(path), std::move(bytes));
}

}  // namespace brook::storage
