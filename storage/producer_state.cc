// storage/producer_state.cc
//
// See producer_state.h for the rules and the snapshot format.
#include "storage/producer_state.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <set>
#include <utility>

#include "fmt/format.h"
#include "io/assert.h"
#include "io/status.h"
#include "net/codec/crc32c.h"
#include "net/codec/endian.h"

namespace brook::storage {
namespace {

constexpr int32_t kSequenceMax = std::numeric_limits<int32_t>::max();

bool is_end_txn_marker(net::ControlRecordType type) {
  return type == net::ControlRecordType::kCommit || type == net::ControlRecordType::kAbort;
}

// Whether `next` may follow `last` within one epoch.
bool in_sequence(int32_t last, int32_t next) {
  return static_cast<int64_t>(next) == static_cast<int64_t>(last) + 1 ||
         (next == 0 && last == kSequenceMax);
}

AddBatchResult error_result(net::Error code, std::string message) {
  AddBatchResult result;
  result.error = code;
  result.message = std::move(message);
  return result;
}

// Starts a new epoch: retained batches belong to the old one.
void set_epoch(ProducerStateEntry& entry, int16_t epoch) {
  if (entry.producer_epoch == epoch) return;
  entry.producer_epoch = epoch;
  entry.batches.clear();
}

void retain_batch(ProducerStateEntry& entry, const BatchMetadata& batch) {
  if (entry.batches.size() == kProducerBatchesRetained) entry.batches.erase(entry.batches.begin());
  entry.batches.push_back(batch);
  BROOK_ASSERT_LE(entry.batches.size(), kProducerBatchesRetained);
}

// Whether now_ms - timestamp_ms >= expiration_ms, without overflow.
bool idle_at_least(int64_t now_ms, int64_t timestamp_ms, int64_t expiration_ms) {
  const __int128 idle = static_cast<__int128>(now_ms) - static_cast<__int128>(timestamp_ms);
  return idle >= static_cast<__int128>(expiration_ms);
}

std::string join_path(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

// --- snapshot entry codec ---------------------------------------------------

// One decoded snapshot entry, before it becomes a ProducerStateEntry.
struct SnapshotEntry {
  int64_t producer_id = 0;
  int16_t epoch = 0;
  int32_t last_sequence = 0;
  int64_t last_offset = 0;
  int32_t offset_delta = 0;
  int64_t timestamp_ms = 0;
  int32_t coordinator_epoch = 0;
  int64_t current_txn_first_offset = 0;
};

void store_entry(std::byte* out, const ProducerStateEntry& entry) {
  std::byte* p = out;
  auto put = [&p](auto value) {
    codec::store_be(p, value);
    p += sizeof(value);
  };
  put(entry.producer_id);
  put(entry.producer_epoch);
  put(entry.last_sequence());
  put(entry.last_data_offset());
  put(entry.last_offset_delta());
  put(entry.last_timestamp_ms);
  put(entry.coordinator_epoch);
  put(entry.current_txn_first_offset.value_or(int64_t{-1}));
  BROOK_ASSERT_EQ(static_cast<size_t>(p - out), kSnapshotEntryBytes);
}

SnapshotEntry load_entry(std::span<const std::byte> bytes, size_t offset) {
  SnapshotEntry e;
  size_t at = offset;
  auto get = [&bytes, &at]<typename T>(T& field) {
    field = codec::load_be<T>(bytes, at);
    at += sizeof(T);
  };
  get(e.producer_id);
  get(e.epoch);
  get(e.last_sequence);
  get(e.last_offset);
  get(e.offset_delta);
  get(e.timestamp_ms);
  get(e.coordinator_epoch);
  get(e.current_txn_first_offset);
  BROOK_ASSERT_EQ(at - offset, kSnapshotEntryBytes);
  return e;
}

absl::StatusOr<ProducerStateEntry> entry_from_snapshot(const SnapshotEntry& e, size_t index) {
  if (e.producer_id < 0) {
    return absl::DataLossError(
        fmt::format("producer snapshot entry {} has a negative producer id {}", index, e.producer_id));
  }
  ProducerStateEntry entry;
  entry.producer_id = e.producer_id;
  entry.producer_epoch = e.epoch;
  entry.coordinator_epoch = e.coordinator_epoch;
  entry.last_timestamp_ms = e.timestamp_ms;
  if (e.current_txn_first_offset >= 0) entry.current_txn_first_offset = e.current_txn_first_offset;
  if (e.last_offset >= 0) {
    if (e.offset_delta < 0 || e.offset_delta > e.last_offset) {
      return absl::DataLossError(
          fmt::format("producer snapshot entry {} (producer {}) has offset delta {} for last offset {}",
                      index, e.producer_id, e.offset_delta, e.last_offset));
    }
    entry.batches.push_back(BatchMetadata{.last_sequence = e.last_sequence,
                                          .last_offset = e.last_offset,
                                          .offset_delta = e.offset_delta,
                                          .timestamp_ms = e.timestamp_ms});
  }
  return entry;
}

// Checks the frame (length, version, CRC, count) and returns the count.
absl::StatusOr<size_t> check_snapshot_frame(std::span<const std::byte> bytes) {
  if (bytes.size() < kSnapshotEntriesOffset) {
    return absl::DataLossError(fmt::format(
        "producer snapshot of {} bytes is shorter than its {}-byte header", bytes.size(),
        kSnapshotEntriesOffset));
  }
  const auto version = codec::load_be<int16_t>(bytes, kSnapshotVersionOffset);
  if (version != kProducerSnapshotVersion) {
    return absl::DataLossError(
        fmt::format("producer snapshot has unknown version {} (expected {})", version,
                    kProducerSnapshotVersion));
  }
  const auto stored_crc = codec::load_be<uint32_t>(bytes, kSnapshotCrcOffset);
  const uint32_t computed_crc = codec::crc32c(0, bytes.subspan(kSnapshotCountOffset));
  if (stored_crc != computed_crc) {
    return absl::DataLossError(fmt::format(
        "producer snapshot is corrupt: stored CRC {:#010x}, computed {:#010x}", stored_crc,
        computed_crc));
  }
  const auto count = codec::load_be<int32_t>(bytes, kSnapshotCountOffset);
  if (count < 0) {
    return absl::DataLossError(fmt::format("producer snapshot has a negative entry count {}", count));
  }
  const uint64_t entries_bytes = bytes.size() - kSnapshotEntriesOffset;
  if (entries_bytes != static_cast<uint64_t>(count) * kSnapshotEntryBytes) {
    return absl::DataLossError(fmt::format(
        "producer snapshot claims {} entries ({} bytes) but holds {} bytes of entries", count,
        static_cast<uint64_t>(count) * kSnapshotEntryBytes, entries_bytes));
  }
  return static_cast<size_t>(count);
}

}  // namespace

// --- sequences and entries ----------------------------------------------------

int32_t increment_sequence(int32_t sequence, int32_t increment) {
  BROOK_ASSERT_GE(increment, 0);
  if (sequence > kSequenceMax - increment) return increment - (kSequenceMax - sequence) - 1;
  return sequence + increment;
}

int32_t decrement_sequence(int32_t sequence, int32_t decrement) {
  BROOK_ASSERT_GE(decrement, 0);
  if (sequence < decrement) return kSequenceMax - (decrement - sequence) + 1;
  return sequence - decrement;
}

int32_t batch_last_sequence(const net::RecordBatchHeader& header) {
  if (header.base_sequence == net::kNoSequence) return net::kNoSequence;
  // parse_batch_header rejects a negative delta; a hand-built header may not.
  return increment_sequence(header.base_sequence, std::max(header.last_offset_delta, 0));
}

int32_t BatchMetadata::first_sequence() const {
  return decrement_sequence(last_sequence, std::max(offset_delta, 0));
}

int64_t BatchMetadata::first_offset() const { return last_offset - offset_delta; }

int32_t ProducerStateEntry::last_sequence() const {
  return batches.empty() ? net::kNoSequence : batches.back().last_sequence;
}

int64_t ProducerStateEntry::last_data_offset() const {
  return batches.empty() ? -1 : batches.back().last_offset;
}

int32_t ProducerStateEntry::last_offset_delta() const {
  return batches.empty() ? 0 : batches.back().offset_delta;
}

std::optional<BatchMetadata> ProducerStateEntry::find_batch(int16_t epoch, int32_t first_sequence,
                                                            int32_t last_sequence) const {
  if (epoch != producer_epoch) return std::nullopt;
  for (const BatchMetadata& batch : batches) {
    if (batch.first_sequence() == first_sequence && batch.last_sequence == last_sequence) {
      return batch;
    }
  }
  return std::nullopt;
}

// --- ProducerAppend -----------------------------------------------------------

ProducerAppend::ProducerAppend(const ProducerStateManager& manager, AppendOrigin origin)
    : manager_(&manager), manager_generation_(manager.generation_), origin_(origin) {}

bool ProducerAppend::validates() const {
  return origin_ == AppendOrigin::kClient || origin_ == AppendOrigin::kCoordinator;
}

ProducerStateEntry ProducerAppend::entry_for(int64_t producer_id) const {
  if (auto it = updated_.find(producer_id); it != updated_.end()) return it->second;
  if (const ProducerStateEntry* current = manager_->last_entry(producer_id)) return *current;
  ProducerStateEntry fresh;
  fresh.producer_id = producer_id;
  return fresh;
}

AddBatchResult ProducerAppend::add_batch(const net::RecordBatchHeader& header,
                                         const std::optional<EndTxnMarkerInfo>& marker) {
  BROOK_ASSERT_EQ(manager_->generation_, manager_generation_);
  BROOK_ASSERT(!marker.has_value() || header.is_control());
  BROOK_ASSERT(!marker.has_value() || is_end_txn_marker(marker->type));
  if (header.producer_id < 0) return {};
  if (header.is_control() && !marker.has_value()) return {};
  ProducerStateEntry entry = entry_for(header.producer_id);
  AddBatchResult result =
      marker.has_value() ? add_marker(entry, header, *marker) : add_data(entry, header);
  if (!result.ok()) {
    failed_ = true;
    return result;
  }
  updated_.insert_or_assign(header.producer_id, std::move(entry));
  return result;
}

AddBatchResult ProducerAppend::check_sequence(const ProducerStateEntry& entry,
                                              const net::RecordBatchHeader& header) const {
  const int32_t first = header.base_sequence;
  if (header.producer_epoch != entry.producer_epoch) {
    // A new epoch (lower ones were refused before) restarts the sequence,
    // unless nothing is known of the producer's epoch.
    if (first != 0 && entry.producer_epoch != net::kNoProducerEpoch) {
      return error_result(
          net::Error::kOutOfOrderSequenceNumber,
          fmt::format("invalid sequence {} for new epoch {} of producer {} at offset {} "
                      "(current epoch {})",
                      first, header.producer_epoch, header.producer_id, header.base_offset,
                      entry.producer_epoch));
    }
    return {};
  }
  if (entry.producer_epoch == net::kNoProducerEpoch) return {};
  const int32_t last = entry.last_sequence();
  if (!in_sequence(last, first)) {
    return error_result(
        net::Error::kOutOfOrderSequenceNumber,
        fmt::format("out of order sequence {} of producer {} at offset {} (last sequence {})",
                    first, header.producer_id, header.base_offset, last));
  }
  return {};
}

AddBatchResult ProducerAppend::add_data(ProducerStateEntry& entry,
                                        const net::RecordBatchHeader& header) {
  if (validates() && header.producer_epoch < entry.producer_epoch) {
    return error_result(
        net::Error::kInvalidProducerEpoch,
        fmt::format("epoch {} of producer {} at offset {} is below its current epoch {}",
                    header.producer_epoch, header.producer_id, header.base_offset,
                    entry.producer_epoch));
  }
  if (origin_ == AppendOrigin::kClient) {
    AddBatchResult sequence = check_sequence(entry, header);
    if (!sequence.ok()) return sequence;
  }
  if (validates() && entry.current_txn_first_offset.has_value() && !header.is_transactional()) {
    return error_result(
        net::Error::kInvalidTxnState,
        fmt::format("non-transactional batch of producer {} at offset {} inside its transaction "
                    "started at offset {}",
                    header.producer_id, header.base_offset, *entry.current_txn_first_offset));
  }
  set_epoch(entry, header.producer_epoch);
  retain_batch(entry, BatchMetadata{.last_sequence = batch_last_sequence(header),
                                    .last_offset = header.last_offset(),
                                    .offset_delta = header.last_offset_delta,
                                    .timestamp_ms = header.max_timestamp});
  entry.last_timestamp_ms = header.max_timestamp;
  if (header.is_transactional() && !entry.current_txn_first_offset.has_value()) {
    entry.current_txn_first_offset = header.base_offset;
    started_.push_back(OngoingTxn{.producer_id = header.producer_id,
                                  .first_offset = header.base_offset});
  }
  return {};
}

AddBatchResult ProducerAppend::add_marker(ProducerStateEntry& entry,
                                          const net::RecordBatchHeader& header,
                                          const EndTxnMarkerInfo& marker) const {
  if (validates() && header.producer_epoch < entry.producer_epoch) {
    return error_result(
        net::Error::kInvalidProducerEpoch,
        fmt::format("marker epoch {} of producer {} at offset {} is below its current epoch {}",
                    header.producer_epoch, header.producer_id, header.base_offset,
                    entry.producer_epoch));
  }
  if (validates() && marker.coordinator_epoch < entry.coordinator_epoch) {
    return error_result(
        net::Error::kTransactionCoordinatorFenced,
        fmt::format("marker of producer {} at offset {} has coordinator epoch {}, below {}",
                    header.producer_id, header.base_offset, marker.coordinator_epoch,
                    entry.coordinator_epoch));
  }
  AddBatchResult result;
  if (entry.current_txn_first_offset.has_value()) {
    result.completed = CompletedTxn{.producer_id = header.producer_id,
                                    .first_offset = *entry.current_txn_first_offset,
                                    .last_offset = header.base_offset,
                                    .aborted = marker.type == net::ControlRecordType::kAbort};
  }
  set_epoch(entry, header.producer_epoch);
  entry.coordinator_epoch = marker.coordinator_epoch;
  entry.current_txn_first_offset.reset();
  entry.last_timestamp_ms = header.max_timestamp;
  return result;
}

// --- ProducerStateManager -----------------------------------------------------

ProducerStateManager::ProducerStateManager(ProducerStateConfig config) : config_(config) {
  BROOK_ASSERT_GE(config_.producer_id_expiration_ms, 0);
}

std::optional<BatchMetadata> ProducerStateManager::find_duplicate(
    const net::RecordBatchHeader& header) const {
  if (header.producer_id < 0) return std::nullopt;
  const ProducerStateEntry* entry = last_entry(header.producer_id);
  if (entry == nullptr) return std::nullopt;
  return entry->find_batch(header.producer_epoch, header.base_sequence,
                           batch_last_sequence(header));
}

ProducerAppend ProducerStateManager::begin_append(AppendOrigin origin) const {
  return ProducerAppend(*this, origin);
}

void ProducerStateManager::commit(ProducerAppend append) {
  BROOK_ASSERT(append.manager_ == this);
  BROOK_ASSERT_EQ(append.manager_generation_, generation_);
  BROOK_ASSERT(!append.failed_);
  changed();
  for (auto& [producer_id, entry] : append.updated_) {
    BROOK_ASSERT_EQ(entry.producer_id, producer_id);
    producers_.insert_or_assign(producer_id, std::move(entry));
  }
  // A transaction may also have ended in this append; it stays here until
  // complete_txn, like any other completed one.
  for (const OngoingTxn& txn : append.started_) ongoing_.insert_or_assign(txn.first_offset, txn);
}

void ProducerStateManager::update_map_end_offset(int64_t offset) {
  changed();
  map_end_offset_ = offset;
}

int64_t ProducerStateManager::last_stable_offset(const CompletedTxn& completed) const {
  for (const auto& [first_offset, txn] : ongoing_) {
    if (first_offset != completed.first_offset) return first_offset;
  }
  return completed.last_offset + 1;
}

void ProducerStateManager::complete_txn(const CompletedTxn& completed) {
  changed();
  auto it = ongoing_.find(completed.first_offset);
  // Only a corrupt replicated log (two transactions at one offset) can make
  // the transaction at this offset another producer's.
  if (it != ongoing_.end() && it->second.producer_id == completed.producer_id) ongoing_.erase(it);
}

std::optional<int64_t> ProducerStateManager::first_unstable_offset() const {
  if (ongoing_.empty()) return std::nullopt;
  return ongoing_.begin()->first;
}

bool ProducerStateManager::has_ongoing_transaction(int64_t producer_id) const {
  const ProducerStateEntry* entry = last_entry(producer_id);
  return entry != nullptr && entry->current_txn_first_offset.has_value();
}

const ProducerStateEntry* ProducerStateManager::last_entry(int64_t producer_id) const {
  auto it = producers_.find(producer_id);
  return it == producers_.end() ? nullptr : &it->second;
}

void ProducerStateManager::remove_expired_producers(int64_t now_ms) {
  changed();
  std::erase_if(producers_, [&](const auto& item) {
    const ProducerStateEntry& entry = item.second;
    return !entry.current_txn_first_offset.has_value() &&
           idle_at_least(now_ms, entry.last_timestamp_ms, config_.producer_id_expiration_ms);
  });
}

void ProducerStateManager::truncate_head(int64_t log_start_offset) {
  changed();
  map_end_offset_ = std::max(map_end_offset_, log_start_offset);
}

void ProducerStateManager::evict_producers_before(int64_t log_start_offset) {
  changed();
  std::set<int64_t> evicted;
  for (const auto& [producer_id, entry] : producers_) {
    if (entry.batches.empty() || entry.last_data_offset() < log_start_offset) {
      evicted.insert(producer_id);
    }
  }
  std::erase_if(producers_, [&](const auto& item) { return evicted.contains(item.first); });
  std::erase_if(ongoing_,
                [&](const auto& item) { return evicted.contains(item.second.producer_id); });
  truncate_head(log_start_offset);
}

void ProducerStateManager::truncate_fully_and_start_at(int64_t offset) {
  changed();
  producers_.clear();
  ongoing_.clear();
  map_end_offset_ = offset;
}

// --- snapshots ----------------------------------------------------------------

io::Buffer ProducerStateManager::encode_snapshot() const {
  BROOK_ASSERT_LE(producers_.size(), static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  const size_t size = kSnapshotEntriesOffset + producers_.size() * kSnapshotEntryBytes;
  io::Buffer buffer = io::Buffer::allocate(size);
  std::byte* out = buffer.mutable_data();
  codec::store_be(out + kSnapshotVersionOffset, kProducerSnapshotVersion);
  codec::store_be(out + kSnapshotCountOffset, static_cast<int32_t>(producers_.size()));
  size_t at = kSnapshotEntriesOffset;
  for (const auto& [producer_id, entry] : producers_) {
    BROOK_ASSERT_EQ(entry.producer_id, producer_id);
    store_entry(out + at, entry);
    at += kSnapshotEntryBytes;
  }
  BROOK_ASSERT_EQ(at, size);
  const uint32_t crc =
      codec::crc32c(0, out + kSnapshotCountOffset, size - kSnapshotCountOffset);
  codec::store_be(out + kSnapshotCrcOffset, crc);
  return buffer;
}

absl::Status ProducerStateManager::load_snapshot(std::span<const std::byte> bytes,
                                                 int64_t snapshot_offset) {
  ASSIGN_OR_RETURN(const size_t count, check_snapshot_frame(bytes));
  std::map<int64_t, ProducerStateEntry> producers;
  std::map<int64_t, OngoingTxn> ongoing;
  for (size_t i = 0; i < count; ++i) {
    const SnapshotEntry raw = load_entry(bytes, kSnapshotEntriesOffset + i * kSnapshotEntryBytes);
    ASSIGN_OR_RETURN(ProducerStateEntry entry, entry_from_snapshot(raw, i));
    if (entry.current_txn_first_offset.has_value()) {
      const int64_t first = *entry.current_txn_first_offset;
      if (!ongoing.emplace(first, OngoingTxn{entry.producer_id, first}).second) {
        return absl::DataLossError(fmt::format(
            "producer snapshot has two transactions starting at offset {}", first));
      }
    }
    const int64_t producer_id = entry.producer_id;
    if (!producers.emplace(producer_id, std::move(entry)).second) {
      return absl::DataLossError(
          fmt::format("producer snapshot names producer {} twice", producer_id));
    }
  }
  changed();
  producers_ = std::move(producers);
  ongoing_ = std::move(ongoing);
  map_end_offset_ = snapshot_offset;
  return absl::OkStatus();
}

io::Task<absl::Status> ProducerStateManager::write_snapshot_file(io::Disk& disk, std::string dir,
                                                                 int64_t offset) const {
  // Not a coroutine: the state is encoded now, and the task holds no `this`.
  return storage::write_snapshot_file(disk, std::move(dir), offset, encode_snapshot());
}

std::string snapshot_file_name(int64_t offset) {
  BROOK_ASSERT_GE(offset, 0);
  return fmt::format("{:0{}d}{}", offset, kSnapshotFileOffsetDigits, kSnapshotFileSuffix);
}

std::optional<int64_t> parse_snapshot_file_name(std::string_view name) {
  if (!name.ends_with(kSnapshotFileSuffix)) return std::nullopt;
  const std::string_view digits = name.substr(0, name.size() - kSnapshotFileSuffix.size());
  if (digits.size() != kSnapshotFileOffsetDigits) return std::nullopt;
  int64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    const int64_t digit = c - '0';
    if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

io::Task<absl::Status> write_snapshot_file(io::Disk& disk, std::string dir, int64_t offset,
                                           io::Buffer snapshot) {
  if (snapshot.size() > kSnapshotBytesMax) {
    co_return absl::ResourceExhaustedError(fmt::format(
        "producer snapshot of {} bytes exceeds {} bytes", snapshot.size(), kSnapshotBytesMax));
  }
  const std::string path = join_path(dir, snapshot_file_name(offset));
  const std::string temp_path = path + ".tmp";
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> file,
                      co_await disk.open(temp_path, io::OpenMode::kCreate));
  // A temporary file left by a crash may be longer than this snapshot.
  CO_RETURN_IF_ERROR(co_await file->truncate(0));
  CO_RETURN_IF_ERROR(co_await file->write_at(0, io::BufferChain(std::move(snapshot))));
  CO_RETURN_IF_ERROR(co_await file->datasync());
  CO_RETURN_IF_ERROR(co_await file->close());
  CO_RETURN_IF_ERROR(co_await disk.rename(temp_path, path));
  CO_RETURN_IF_ERROR(co_await disk.sync_dir(dir));
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<io::Buffer>> read_snapshot_file(io::Disk& disk, std::string dir,
                                                       int64_t offset) {
  const std::string path = join_path(dir, snapshot_file_name(offset));
  CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> file,
                      co_await disk.open(path, io::OpenMode::kReadOnly));
  const uint64_t size = file->size();
  if (size > kSnapshotBytesMax) {
    co_return absl::DataLossError(fmt::format("producer snapshot {} has {} bytes, more than {}",
                                              path, size, kSnapshotBytesMax));
  }
  CO_ASSIGN_OR_RETURN(io::Buffer bytes, co_await file->read_at(0, static_cast<size_t>(size)));
  if (bytes.size() != size) {
    co_return absl::DataLossError(fmt::format("producer snapshot {}: read {} of {} bytes", path,
                                              bytes.size(), size));
  }
  CO_RETURN_IF_ERROR(co_await file->close());
  co_return bytes;
}

io::Task<absl::StatusOr<std::vector<int64_t>>> list_snapshot_offsets(io::Disk& disk,
                                                                     std::string dir) {
  CO_ASSIGN_OR_RETURN(std::vector<std::string> names, co_await disk.list(dir));
  std::vector<int64_t> offsets;
  for (const std::string& name : names) {
    if (std::optional<int64_t> offset = parse_snapshot_file_name(name)) offsets.push_back(*offset);
  }
  std::sort(offsets.begin(), offsets.end());
  co_return offsets;
}

}  // namespace brook::storage
