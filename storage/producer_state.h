// storage/producer_state.h
//
// Producer state of one partition log: what idempotent and transactional
// producers (KIP-98) last wrote, so the log can reject zombies and
// out-of-order batches, answer retried batches with their original offsets,
// and track open transactions for the last stable offset. Kafka's
// ProducerStateManager, ProducerAppendInfo and ProducerStateEntry, as pure
// in-memory logic plus the `.snapshot` file format.
//
// Ownership: one ProducerStateManager per partition log, owned by it and used
// only on its event loop. A ProducerAppend borrows its manager: it must be
// used and committed (or dropped) before anything else changes the manager;
// an assertion catches a violation.
//
// The log drives it per append:
//   1. kClient appends: for each batch with a producer id, find_duplicate();
//      a hit means the batch was already written: answer with its offsets.
//   2. ProducerAppend append = manager.begin_append(origin); then for each
//      batch, in offset order, after offsets were assigned:
//      append.add_batch(header, marker). The first error fails the append.
//   3. If every batch was accepted and the append was written:
//      manager.commit(std::move(append)); manager.update_map_end_offset(end).
//   4. For each CompletedTxn: last_stable_offset(txn), write the aborted txn
//      to the transaction index, then complete_txn(txn).
//
// Validation (origins kClient and kCoordinator; see add_batch):
//   - epoch below the producer's epoch: INVALID_PRODUCER_EPOCH, for data and
//     for markers (Kafka since 2.7, KIP-588: PRODUCER_FENCED is no longer
//     returned here);
//   - kClient data only, sequence numbers: a new (higher) epoch must start at
//     sequence 0 unless the producer has no known epoch; within an epoch the
//     first sequence must follow the last one (INT32_MAX wraps to 0), and
//     must be 0 when the epoch has no batch yet; otherwise
//     OUT_OF_ORDER_SEQUENCE_NUMBER. A producer without an entry (never seen,
//     or expired) may start at any sequence (KIP-360);
//   - non-transactional data while a transaction is open: INVALID_TXN_STATE;
//   - a marker with a coordinator epoch below the producer's:
//     TRANSACTION_COORDINATOR_FENCED.
// Origins kReplication and kRecovery apply what the leader wrote without
// these checks (a lower epoch or coordinator epoch replaces the current one,
// as in the leader's log; non-transactional data inside a transaction leaves
// the transaction open).
//
// Snapshot file (`<offset, 20 digits>.snapshot`, Kafka's ProducerSnapshot
// version 1), big-endian:
//
//   offset size field
//        0    2 version                 1
//        2    4 crc                     CRC-32C (uint32) of bytes [6, end)
//        6    4 entry count             int32, >= 0
//       10      entries, 46 bytes each, in producer id order:
//                 producer_id int64, epoch int16, last_sequence int32,
//                 last_offset int64 (-1: no batch), offset_delta int32,
//                 timestamp int64 (the producer's last timestamp),
//                 coordinator_epoch int32,
//                 current_txn_first_offset int64 (-1: no transaction)
//
// Every producer is written, also those without a retained batch (their
// last_offset is -1, last_sequence -1, offset_delta 0), as Kafka does. A
// snapshot keeps only the last batch of each producer, so after loading one,
// duplicates of older retained batches are no longer detected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/disk.h"
#include "io/task.h"
#include "net/kafka/errors.h"
#include "net/kafka/record_batch.h"

namespace brook::storage {

// Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: the retained batches per
// producer, matching max.in.flight.requests.per.connection <= 5.
inline constexpr size_t kProducerBatchesRetained = 5;
// producer.id.expiration.ms default (one day).
inline constexpr int64_t kProducerIdExpirationMsDefault = 86'400'000;
// The coordinator epoch of a producer that never saw a marker.
inline constexpr int32_t kNoCoordinatorEpoch = -1;

// Snapshot layout (see the header comment).
inline constexpr int16_t kProducerSnapshotVersion = 1;
inline constexpr size_t kSnapshotVersionOffset = 0;
inline constexpr size_t kSnapshotCrcOffset = kSnapshotVersionOffset + 2;
inline constexpr size_t kSnapshotCountOffset = kSnapshotCrcOffset + 4;
inline constexpr size_t kSnapshotEntriesOffset = kSnapshotCountOffset + 4;
inline constexpr size_t kSnapshotEntryBytes = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;
static_assert(kSnapshotEntriesOffset == 10);
static_assert(kSnapshotEntryBytes == 46);
// The largest snapshot file read_snapshot_file reads (about 5.8 million
// producers); a larger file is refused rather than read into memory.
inline constexpr uint64_t kSnapshotBytesMax = uint64_t{256} << 20;
inline constexpr std::string_view kSnapshotFileSuffix = ".snapshot";
// Digits of the offset in a snapshot file name (Kafka's filenamePrefixFromOffset).
inline constexpr size_t kSnapshotFileOffsetDigits = 20;

struct ProducerStateConfig {
  // producer.id.expiration.ms: a producer idle this long (by its last batch
  // timestamp) without an open transaction is forgotten.
  // REQUIRES: >= 0.
  int64_t producer_id_expiration_ms = kProducerIdExpirationMsDefault;
};

// Who is appending; decides how much add_batch validates.
enum class AppendOrigin : uint8_t {
  kClient,       // Produce requests: epochs, sequences, transactions
  kCoordinator,  // group / transaction coordinators, WriteTxnMarkers: no sequences
  kReplication,  // a follower copying the leader: no validation
  kRecovery,     // rebuilding state from the log on startup: no validation
};

// A commit or abort marker, decoded by the log from the control record of a
// control batch (net::decode_control_record_key / decode_end_txn_marker).
struct EndTxnMarkerInfo {
  // kCommit or kAbort.
  net::ControlRecordType type = net::ControlRecordType::kCommit;
  int32_t coordinator_epoch = 0;
  bool operator==(const EndTxnMarkerInfo&) const = default;
};

// One retained batch of a producer (Kafka's BatchMetadata).
struct BatchMetadata {
  int32_t last_sequence = net::kNoSequence;
  int64_t last_offset = -1;
  // last_offset - first offset (the batch's lastOffsetDelta).
  int32_t offset_delta = 0;
  int64_t timestamp_ms = net::kNoTimestamp;

  int32_t first_sequence() const;
  int64_t first_offset() const;
  bool operator==(const BatchMetadata&) const = default;
};

// What is known of one producer (Kafka's ProducerStateEntry).
// Invariant: batches.size() <= kProducerBatchesRetained; all batches were
// written with producer_epoch (a new epoch clears them); oldest first.
struct ProducerStateEntry {
  int64_t producer_id = net::kNoProducerId;
  int16_t producer_epoch = net::kNoProducerEpoch;
  int32_t coordinator_epoch = kNoCoordinatorEpoch;
  // Max timestamp of the last data batch, or timestamp of the last marker.
  int64_t last_timestamp_ms = net::kNoTimestamp;
  // First offset of the producer's open transaction.
  std::optional<int64_t> current_txn_first_offset;
  std::vector<BatchMetadata> batches;

  // Of the newest batch; kNoSequence / -1 / 0 without one.
  int32_t last_sequence() const;
  int64_t last_data_offset() const;
  int32_t last_offset_delta() const;
  // The retained batch with exactly this sequence range, if the epoch matches.
  std::optional<BatchMetadata> find_batch(int16_t epoch, int32_t first_sequence,
                                          int32_t last_sequence) const;
  bool operator==(const ProducerStateEntry&) const = default;
};

// A transaction ended by a marker (Kafka's CompletedTxn).
struct CompletedTxn {
  int64_t producer_id = net::kNoProducerId;
  int64_t first_offset = 0;
  // The marker's offset.
  int64_t last_offset = 0;
  bool aborted = false;
  bool operator==(const CompletedTxn&) const = default;
};

// An open transaction, keyed by its first offset in ongoing_transactions().
struct OngoingTxn {
  int64_t producer_id = net::kNoProducerId;
  int64_t first_offset = 0;
  bool operator==(const OngoingTxn&) const = default;
};

// The outcome of ProducerAppend::add_batch.
struct AddBatchResult {
  // kNone, or the Kafka error the whole append fails with.
  net::Error error = net::Error::kNone;
  std::string message;
  // Set for a commit or abort marker that ended a transaction with data. A
  // marker without transaction data completes nothing (Kafka since 2.8,
  // KAFKA-10702: empty transactions need no index entry nor LSO bookkeeping).
  std::optional<CompletedTxn> completed;

  bool ok() const { return error == net::Error::kNone; }
};

// The last sequence of a batch: base_sequence + last_offset_delta, wrapping
// past INT32_MAX to 0 (DefaultRecordBatch.incrementSequence); kNoSequence
// when the batch has none.
int32_t batch_last_sequence(const net::RecordBatchHeader& header);
// `sequence` advanced by `increment` (>= 0) with that wrap, and back.
int32_t increment_sequence(int32_t sequence, int32_t increment);
int32_t decrement_sequence(int32_t sequence, int32_t decrement);

class ProducerStateManager;

// The producer-state updates of one append, validated batch by batch and
// applied all at once by ProducerStateManager::commit (Kafka's map of
// ProducerAppendInfo). Later batches of a producer are checked against the
// state the earlier ones left.
class ProducerAppend {
 public:
  ProducerAppend(ProducerAppend&&) = default;
  ProducerAppend& operator=(ProducerAppend&&) = default;
  ProducerAppend(const ProducerAppend&) = delete;
  ProducerAppend& operator=(const ProducerAppend&) = delete;

  AppendOrigin origin() const { return origin_; }

  // Validates one batch and records its update. Batches without a producer
  // id (producer_id < 0) and control batches without a commit/abort marker
  // (leader-change records, or an empty control batch left by compaction)
  // change nothing and are OK. A failed batch records nothing.
  // `marker` is the batch's marker when it is a commit/abort control batch.
  // REQUIRES: the manager was not changed since begin_append; `marker` only
  // for control batches, with type kCommit or kAbort; batches come in offset
  // order with their final offsets.
  AddBatchResult add_batch(const net::RecordBatchHeader& header,
                           const std::optional<EndTxnMarkerInfo>& marker);

  // Whether some add_batch failed (the append must not be committed).
  bool failed() const { return failed_; }
  // The producers' entries as commit would leave them.
  const std::map<int64_t, ProducerStateEntry>& updated_entries() const { return updated_; }
  // Transactions the append opens, in offset order.
  const std::vector<OngoingTxn>& started_transactions() const { return started_; }

 private:
  friend class ProducerStateManager;
  ProducerAppend(const ProducerStateManager& manager, AppendOrigin origin);

  bool validates() const;
  ProducerStateEntry entry_for(int64_t producer_id) const;
  AddBatchResult add_data(ProducerStateEntry& entry, const net::RecordBatchHeader& header);
  AddBatchResult add_marker(ProducerStateEntry& entry, const net::RecordBatchHeader& header,
                            const EndTxnMarkerInfo& marker) const;
  AddBatchResult check_sequence(const ProducerStateEntry& entry,
                                const net::RecordBatchHeader& header) const;

  const ProducerStateManager* manager_;
  uint64_t manager_generation_;
  AppendOrigin origin_;
  bool failed_ = false;
  std::map<int64_t, ProducerStateEntry> updated_;
  std::vector<OngoingTxn> started_;
};

class ProducerStateManager {
 public:
  explicit ProducerStateManager(ProducerStateConfig config = {});
  ProducerStateManager(const ProducerStateManager&) = delete;
  ProducerStateManager& operator=(const ProducerStateManager&) = delete;
  // Moving invalidates ProducerAppends begun on the moved-from manager.
  ProducerStateManager(ProducerStateManager&&) = default;
  ProducerStateManager& operator=(ProducerStateManager&&) = default;

  const ProducerStateConfig& config() const { return config_; }

  // For a kClient append: the retained batch a retried batch duplicates (same
  // producer, same epoch, same first and last sequence), if any. Checks the
  // committed state only, as Kafka does.
  std::optional<BatchMetadata> find_duplicate(const net::RecordBatchHeader& header) const;

  ProducerAppend begin_append(AppendOrigin origin) const;
  // Applies a validated append.
  // REQUIRES: `append` came from this manager's begin_append, nothing changed
  // the manager since, and no add_batch of it failed.
  void commit(ProducerAppend append);

  // The offset after the last batch applied (Kafka's mapEndOffset).
  int64_t map_end_offset() const { return map_end_offset_; }
  void update_map_end_offset(int64_t offset);

  // The last stable offset once `completed` is done: the first offset of the
  // earliest other open transaction, else completed.last_offset + 1.
  // Kafka's lastStableOffset(completedTxn), which skips every transaction of
  // the same producer; this skips only `completed` itself (they differ only
  // if one append holds a marker and the next transaction of its producer).
  int64_t last_stable_offset(const CompletedTxn& completed) const;
  // Forgets the open transaction `completed` ended. Call after commit and
  // after the transaction index was written. No-op when it is not open.
  void complete_txn(const CompletedTxn& completed);

  // The first offset of the earliest open transaction (Kafka's
  // firstUndecidedOffset). The log's last stable offset is
  // min(this, high watermark).
  std::optional<int64_t> first_unstable_offset() const;
  // Open transactions by first offset. Includes transactions completed by a
  // committed append until complete_txn.
  const std::map<int64_t, OngoingTxn>& ongoing_transactions() const { return ongoing_; }
  bool has_ongoing_transaction(int64_t producer_id) const;

  const std::map<int64_t, ProducerStateEntry>& producers() const { return producers_; }
  // nullptr when the producer is unknown. Valid until the manager changes.
  const ProducerStateEntry* last_entry(int64_t producer_id) const;

  // Forgets producers without an open transaction whose last timestamp is
  // producer_id_expiration_ms or more before now_ms.
  void remove_expired_producers(int64_t now_ms);
  // The log start offset moved up (retention, DeleteRecords). Producers are
  // kept until they expire (KIP-360, Kafka since 2.4); only the map end
  // offset moves up to the new start.
  void truncate_head(int64_t log_start_offset);
  // Kafka before 2.4: forgets producers with no retained batch at or after
  // log_start_offset, with their open transactions, then truncate_head.
  void evict_producers_before(int64_t log_start_offset);
  // Forgets everything; the map end offset becomes `offset`.
  void truncate_fully_and_start_at(int64_t offset);
  void clear() { truncate_fully_and_start_at(0); }

  // The snapshot file's bytes for the current producers.
  io::Buffer encode_snapshot() const;
  // Replaces the state with a snapshot's: the producers, their open
  // transactions, and map_end_offset() = snapshot_offset. DataLoss (state
  // unchanged) on a short file, unknown version, bad CRC, bad entry count or
  // length, or an impossible entry (negative or repeated producer id, two
  // transactions at one offset, negative offset delta).
  absl::Status load_snapshot(std::span<const std::byte> bytes, int64_t snapshot_offset);

  // Writes encode_snapshot() as `dir`/snapshot_file_name(offset) durably
  // (see write_snapshot_file below). The state is encoded when this is
  // called, so the manager may change while the write runs.
  io::Task<absl::Status> write_snapshot_file(io::Disk& disk, std::string dir,
                                             int64_t offset) const;

 private:
  friend class ProducerAppend;
  void changed() { ++generation_; }

  ProducerStateConfig config_;
  std::map<int64_t, ProducerStateEntry> producers_;
  std::map<int64_t, OngoingTxn> ongoing_;
  int64_t map_end_offset_ = 0;
  // Bumped by every change, so a stale ProducerAppend is caught.
  uint64_t generation_ = 0;
};

// "00000000000000000042.snapshot" for offset 42.
// REQUIRES: offset >= 0.
std::string snapshot_file_name(int64_t offset);
// The offset of a snapshot file name: exactly 20 decimal digits (fitting
// int64) then ".snapshot", as snapshot_file_name makes them; std::nullopt for
// any other name (temporary files, Kafka's ".deleted" ones).
std::optional<int64_t> parse_snapshot_file_name(std::string_view name);

// Writes `snapshot` to `dir`/snapshot_file_name(offset): to a temporary name
// first (".tmp" appended), datasync, rename over the final name, sync_dir.
// A crash leaves the old file or the new one, never a torn one (a leftover
// temporary file is not a snapshot name). ResourceExhausted when larger than
// kSnapshotBytesMax. `dir` is a Disk path ("" for the root).
io::Task<absl::Status> write_snapshot_file(io::Disk& disk, std::string dir, int64_t offset,
                                           io::Buffer snapshot);
// The bytes of `dir`/snapshot_file_name(offset), for load_snapshot.
// NotFound when missing; DataLoss when larger than kSnapshotBytesMax or
// shorter than its size.
io::Task<absl::StatusOr<io::Buffer>> read_snapshot_file(io::Disk& disk, std::string dir,
                                                       int64_t offset);
// Offsets of the snapshot files in `dir`, ascending.
io::Task<absl::StatusOr<std::vector<int64_t>>> list_snapshot_offsets(io::Disk& disk,
                                                                     std::string dir);

}  // namespace brook::storage
