// raft/snapshot.cc
#include "raft/snapshot.h"

#include <fmt/format.h>

#include <charconv>

#include "io/status.h"
#include "net/kafka/messages/snapshot_footer_record.h"
#include "net/kafka/messages/snapshot_header_record.h"
#include "net/kafka/message.h"
#include "net/kafka/record_batch.h"
#include "net/kafka/wire.h"
#include "storage/checkpoint.h"

namespace brook::raft {

namespace {

constexpr std::string_view kSuffix = ".checkpoint";
constexpr size_t kSnapshotBytesMax = size_t{1} << 30;
constexpr size_t kDecodedBytesMax = size_t{1} << 30;
constexpr int kReadAttempts = 4;

std::string path_of(std::string_view dir, SnapshotId id) {
  return dir.empty() ? snapshot_file_name(id) : fmt::format("{}/{}", dir, snapshot_file_name(id));
}

template <typename M>
absl::StatusOr<io::Buffer> control_batch(net::ControlRecordType type, const M& message,
                                         int64_t base_offset, int64_t timestamp_ms) {
  io::BufferChain chain;
  RETURN_IF_ERROR(net::encode_to(message, 0, &chain));
  std::string value;
  for (const io::Buffer& part : chain.parts()) value.append(part.view());
  net::RecordBatchOptions options;
  options.base_offset = base_offset;
  options.control = true;
  net::RecordBatchBuilder builder(options);
  net::NewRecord record;
  record.timestamp_ms = timestamp_ms;
  record.key = net::encode_control_record_key({.version = net::kControlRecordKeyVersion, .type = type});
  record.value = io::Buffer::copy_of(value);
  builder.append(std::move(record));
  return builder.build();
}

absl::StatusOr<net::ControlRecordType> control_type(const net::BatchView& batch) {
  if (!batch.header.is_control()) return absl::DataLossError("snapshot: expected a control batch");
  ASSIGN_OR_RETURN(std::vector<net::Record> records, net::decode_records(batch.bytes, kDecodedBytesMax));
  if (records.size() != 1 || !records[0].key.has_value()) {
    return absl::DataLossError("snapshot: a control batch without its one record");
  }
  ASSIGN_OR_RETURN(net::ControlRecordKey key, net::decode_control_record_key(records[0].key->span()));
  return key.type;
}

}  // namespace

std::string snapshot_file_name(SnapshotId id) {
  return fmt::format("{:020d}-{:010d}{}", id.end_offset, id.epoch, kSuffix);
}

std::optional<SnapshotId> parse_snapshot_file_name(std::string_view name) {
  if (name.size() != 20 + 1 + 10 + kSuffix.size() || !name.ends_with(kSuffix) || name[20] != '-') {
    return std::nullopt;
  }
  SnapshotId id;
  auto a = std::from_chars(name.data(), name.data() + 20, id.end_offset);
  auto b = std::from_chars(name.data() + 21, name.data() + 31, id.epoch);
  if (a.ec != std::errc() || a.ptr != name.data() + 20 || b.ec != std::errc() ||
      b.ptr != name.data() + 31 || id.end_offset < 0 || id.epoch < 0) {
    return std::nullopt;
  }
  return id;
}

absl::StatusOr<io::Buffer> encode_snapshot(const std::vector<io::Buffer>& values,
                                           int64_t last_contained_timestamp_ms,
                                           size_t records_per_batch, const KRaftControl* kraft) {
  io::BufferChain out;
  int64_t offset = 0;
  net::SnapshotHeaderRecord header;
  header.last_contained_log_timestamp = last_contained_timestamp_ms;
  ASSIGN_OR_RETURN(io::Buffer head, control_batch(net::ControlRecordType::kSnapshotHeader, header,
                                                  offset++, last_contained_timestamp_ms));
  out.append(std::move(head));
  if (kraft != nullptr && (kraft->kraft_version.has_value() || kraft->voters.has_value())) {
    net::RecordBatchOptions options;
    options.base_offset = offset;
    options.control = true;
    net::RecordBatchBuilder builder(options);
    RETURN_IF_ERROR(append_kraft_control(builder, *kraft, last_contained_timestamp_ms));
    offset += static_cast<int64_t>(builder.record_count());
    ASSIGN_OR_RETURN(io::Buffer batch, builder.build());
    out.append(std::move(batch));
  }
  for (size_t i = 0; i < values.size(); i += records_per_batch) {
    net::RecordBatchOptions options;
    options.base_offset = offset;
    net::RecordBatchBuilder builder(options);
    for (size_t j = i; j < values.size() && j < i + records_per_batch; ++j) {
      net::NewRecord record;
      record.timestamp_ms = last_contained_timestamp_ms;
      record.value = values[j];
      builder.append(std::move(record));
    }
    offset += static_cast<int64_t>(builder.record_count());
    ASSIGN_OR_RETURN(io::Buffer batch, builder.build());
    out.append(std::move(batch));
  }
  ASSIGN_OR_RETURN(io::Buffer foot, control_batch(net::ControlRecordType::kSnapshotFooter,
                                                  net::SnapshotFooterRecord{}, offset,
                                                  last_contained_timestamp_ms));
  out.append(std::move(foot));
  io::Buffer bytes = io::Buffer::allocate(out.size());
  size_t at = 0;
  for (const io::Buffer& part : out.parts()) {
    std::copy(part.span().begin(), part.span().end(), bytes.mutable_data() + at);
    at += part.size();
  }
  return bytes;
}

absl::StatusOr<std::vector<io::Buffer>> decode_snapshot(const io::Buffer& bytes) {
  net::BatchIterator it(bytes, {.crc = net::CrcCheck::kVerify, .partial = net::PartialBatch::kReject});
  std::vector<net::BatchView> batches;
  while (true) {
    absl::StatusOr<std::optional<net::BatchView>> next = it.next();
    if (!next.ok()) return absl::DataLossError(fmt::format("snapshot: {}", std::string(next.status().message())));
    if (!next->has_value()) break;
    batches.push_back(std::move(**next));
  }
  if (batches.size() < 2) return absl::DataLossError("snapshot: no header and footer");
  ASSIGN_OR_RETURN(net::ControlRecordType first, control_type(batches.front()));
  ASSIGN_OR_RETURN(net::ControlRecordType last, control_type(batches.back()));
  if (first != net::ControlRecordType::kSnapshotHeader || last != net::ControlRecordType::kSnapshotFooter) {
    return absl::DataLossError("snapshot: not framed by a header and a footer");
  }
  std::vector<io::Buffer> values;
  for (size_t i = 1; i + 1 < batches.size(); ++i) {
    if (batches[i].header.is_control()) continue;
    ASSIGN_OR_RETURN(std::vector<net::Record> records, net::decode_records(batches[i].bytes, kDecodedBytesMax));
    for (net::Record& r : records) {
      if (r.value.has_value()) values.push_back(std::move(*r.value));
    }
  }
  return values;
}

absl::StatusOr<KRaftControl> snapshot_kraft_control(const io::Buffer& bytes) {
  net::BatchIterator it(bytes, {.crc = net::CrcCheck::kVerify, .partial = net::PartialBatch::kReject});
  KRaftControl out;
  while (true) {
    absl::StatusOr<std::optional<net::BatchView>> next = it.next();
    if (!next.ok()) return absl::DataLossError(fmt::format("snapshot: {}", std::string(next.status().message())));
    if (!next->has_value()) break;
    if (!(*next)->header.is_control()) continue;
    ASSIGN_OR_RETURN(KRaftControl found, read_kraft_control((*next)->bytes));
    if (found.kraft_version.has_value()) out.kraft_version = found.kraft_version;
    if (found.voters.has_value()) out.voters = std::move(found.voters);
  }
  return out;
}

io::Task<absl::Status> write_bootstrap_checkpoint(io::Disk& disk, std::string dir, VoterSet voters) {
  KRaftControl kraft;
  kraft.kraft_version = kKRaftVersionMax;
  kraft.voters = std::move(voters);
  CO_ASSIGN_OR_RETURN(io::Buffer bytes, encode_snapshot({}, 0, 1000, &kraft));
  if (!dir.empty()) CO_RETURN_IF_ERROR(co_await disk.make_dir(dir));
  co_return co_await write_snapshot(disk, std::move(dir), kBootstrapSnapshotId, std::move(bytes));
}

io::Task<absl::Status> write_snapshot(io::Disk& disk, std::string dir, SnapshotId id, io::Buffer bytes) {
  co_return co_await storage::write_file_atomically(disk, path_of(dir, id), std::move(bytes));
}

io::Task<absl::StatusOr<io::Buffer>> read_snapshot(io::Disk& disk, std::string dir, SnapshotId id) {
  absl::Status last;
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    absl::StatusOr<std::optional<io::Buffer>> bytes =
        co_await storage::read_whole_file(disk, path_of(dir, id), kSnapshotBytesMax);
    if (!bytes.ok()) {
      last = bytes.status();
      continue;
    }
    if (!bytes->has_value()) co_return absl::NotFoundError(fmt::format("no snapshot {}", snapshot_file_name(id)));
    absl::StatusOr<std::vector<io::Buffer>> checked = decode_snapshot(**bytes);
    if (checked.ok()) co_return std::move(**bytes);
    last = checked.status();
  }
  co_return last;
}

io::Task<absl::StatusOr<std::vector<SnapshotId>>> list_snapshots(io::Disk& disk, std::string dir) {
  CO_ASSIGN_OR_RETURN(std::vector<std::string> names, co_await disk.list(dir));
  std::vector<SnapshotId> out;
  for (const std::string& name : names) {
    if (name.ends_with(".checkpoint.tmp")) {
      // (The path is built first: g++ 12 destroys a ?: temporary inside a
      // co_await expression twice.)
      const std::string path = dir.empty() ? name : fmt::format("{}/{}", dir, name);
      CO_RETURN_IF_ERROR(co_await disk.remove(path));
      continue;
    }
    if (std::optional<SnapshotId> id = parse_snapshot_file_name(name)) out.push_back(*id);
  }
  std::sort(out.begin(), out.end());
  co_return out;
}

io::Task<absl::Status> remove_snapshot(io::Disk& disk, std::string dir, SnapshotId id) {
  CO_RETURN_IF_ERROR(co_await disk.remove(path_of(dir, id)));
  co_return co_await disk.sync_dir(dir);
}

}  // namespace brook::raft
