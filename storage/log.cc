// storage/log.cc
#include "storage/log.h"

#include <algorithm>
#include <utility>

#include "fmt/format.h"
#include "io/assert.h"
#include "io/status.h"
#include "net/codec/crc32c.h"
#include "net/codec/endian.h"
#include "net/kafka/record_batch.h"

namespace brook::storage {
namespace {

// Decompressed records of one batch beyond this are refused while
// validating (a zip bomb, not a batch).
constexpr size_t kValidationDecompressedBytesMax = size_t{256} << 20;
// Reads whose bytes fail check_read() are retried this many times.
constexpr int kReadRereads = 3;

struct Rejection {
  net::Error error;
  std::string message;
};

Rejection rejection_for(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kResourceExhausted:
      return {net::Error::kMessageTooLarge, std::string(s.message())};
    case absl::StatusCode::kUnimplemented:
      return {net::Error::kUnsupportedForMessageFormat, std::string(s.message())};
    default:
      return {net::Error::kCorruptMessage, std::string(s.message())};
  }
}

// The commit/abort marker of a control batch, if it is one.
absl::StatusOr<std::optional<EndTxnMarkerInfo>> marker_of(const net::BatchView& batch) {
  if (!batch.header.is_control()) return std::nullopt;
  ASSIGN_OR_RETURN(std::vector<net::Record> records,
                   net::decode_records(batch.bytes, kValidationDecompressedBytesMax));
  if (records.empty() || !records[0].key.has_value()) return std::nullopt;
  ASSIGN_OR_RETURN(net::ControlRecordKey key, net::decode_control_record_key(records[0].key->span()));
  if (key.type != net::ControlRecordType::kCommit && key.type != net::ControlRecordType::kAbort) {
    return std::nullopt;
  }
  if (!records[0].value.has_value()) return absl::DataLossError("transaction marker without a value");
  ASSIGN_OR_RETURN(net::EndTxnMarker marker, net::decode_end_txn_marker(records[0].value->span()));
  return EndTxnMarkerInfo{key.type, marker.coordinator_epoch};
}

}  // namespace

Log::Log(io::Disk& disk, const io::Clock& clock, LogOptions options)
    : disk_(&disk),
      clock_(&clock),
      dir_(std::move(options.dir)),
      config_(options.config),
      log_start_offset_(options.log_start_offset),
      high_watermark_(options.high_watermark),
      recovery_point_(options.recovery_point),
      producers_(ProducerStateConfig{options.config.producer_id_expiration_ms}) {}

Log::~Log() = default;

int64_t Log::now_ms() const { return io::to_ms(clock_->wall_now()); }

absl::Status Log::fail(absl::Status status) {
  BROOK_ASSERT(!status.ok());
  if (failure_.ok()) {
    failure_ = absl::Status(status.code(),
                            fmt::format("log {} is offline: {}", dir_, std::string(status.message())));
  }
  return failure_;
}

io::Task<absl::StatusOr<std::unique_ptr<Log>>> Log::open(io::Disk& disk, const io::Clock& clock,
                                                        LogOptions options) {
  std::unique_ptr<Log> log(new Log(disk, clock, std::move(options)));
  CO_RETURN_IF_ERROR(co_await log->load());
  co_return log;
}

// --- loading and recovery ----------------------------------------------------

io::Task<absl::Status> Log::load() {
  CO_RETURN_IF_ERROR(co_await disk_->make_dir(dir_));
  CO_ASSIGN_OR_RETURN(std::vector<std::string> names, co_await disk_->list(dir_));
  std::vector<int64_t> bases;
  for (const std::string& name : names) {
    if (std::optional<int64_t> base = parse_offset_file_name(name, kLogSuffix)) {
      bases.push_back(*base);
    } else if (name.ends_with(".tmp") || name.ends_with(kCleanedSuffix)) {
      CO_RETURN_IF_ERROR(co_await disk_->remove(join_path(dir_, name)));
      dir_dirty_ = true;
    }
  }
  std::sort(bases.begin(), bases.end());
  CO_RETURN_IF_ERROR(co_await load_segments(bases));
  if (segments_.empty()) {
    const int64_t start = std::max<int64_t>(log_start_offset_, 0);
    CO_ASSIGN_OR_RETURN(std::unique_ptr<Segment> segment,
                        co_await Segment::create(*disk_, dir_, start, config_, now_ms()));
    segments_.emplace(start, std::move(segment));
    dir_dirty_ = true;
  }
  log_end_offset_ = active().next_offset();
  log_start_offset_ = std::clamp(log_start_offset_, segments_.begin()->first, log_end_offset_);
  recovery_point_ = log_end_offset_;
  high_watermark_ = std::clamp(high_watermark_, log_start_offset_, log_end_offset_);
  if (dir_dirty_) {
    CO_RETURN_IF_ERROR(co_await disk_->sync_dir(dir_));
    dir_dirty_ = false;
  }
  CO_RETURN_IF_ERROR(co_await rebuild_producer_state(txn_rebuild_from_));
  CO_RETURN_IF_ERROR(co_await load_leader_epochs());
  last_flush_ = clock_->now();
  co_return absl::OkStatus();
}

io::Task<absl::Status> Log::load_segments(const std::vector<int64_t>& bases) {
  const int64_t now = now_ms();
  bool recovering = false;
  for (size_t i = 0; i < bases.size(); ++i) {
    const int64_t base = bases[i];
    CO_ASSIGN_OR_RETURN(std::unique_ptr<Segment> segment,
                        co_await Segment::open(*disk_, dir_, base, config_, now));
    const bool trusted = !recovering && i + 1 < bases.size() && bases[i + 1] <= recovery_point_;
    if (trusted) {
      absl::Status loaded = co_await segment->load_indexes();
      if (loaded.ok()) {
        segment->set_next_offset(bases[i + 1]);
        if (segment->txn_index_lost()) txn_rebuild_from_ = std::min(txn_rebuild_from_, base);
        segments_.emplace(base, std::move(segment));
        continue;
      }
      if (loaded.code() != absl::StatusCode::kDataLoss) co_return loaded;
    }
    recovering = true;
    if (!segments_.empty() && base < segments_.rbegin()->second->next_offset()) {
      // Overlaps the segment before it: not a segment this log wrote.
      CO_RETURN_IF_ERROR(co_await segment->remove_files());
      dir_dirty_ = true;
      continue;
    }
    CO_ASSIGN_OR_RETURN(RecoverResult recovered, co_await segment->recover(nullptr, recovery_point_));
    txn_rebuild_from_ = std::min(txn_rebuild_from_, base);
    dir_dirty_ = true;
    CO_RETURN_IF_ERROR(co_await segment->sync());
    segments_.emplace(base, std::move(segment));
    if (recovered.truncated_bytes > 0) {
      // Everything after a bad batch is after a hole: drop it, newest
      // first (see remove_segments_from).
      for (size_t j = bases.size() - 1; j > i; --j) {
        CO_ASSIGN_OR_RETURN(std::unique_ptr<Segment> later,
                            co_await Segment::open(*disk_, dir_, bases[j], config_, now));
        CO_RETURN_IF_ERROR(co_await later->remove_files());
        dir_dirty_ = true;
      }
      break;
    }
  }
  co_return absl::OkStatus();
}

io::Task<absl::Status> Log::load_leader_epochs() {
  const std::string path = join_path(dir_, std::string(kLeaderEpochCheckpointFileName));
  absl::StatusOr<LeaderEpochCache> cache = co_await read_leader_epoch_checkpoint(*disk_, path);
  bool rewrite = false;
  if (cache.ok()) {
    epochs_ = std::move(*cache);
  } else if (cache.status().code() == absl::StatusCode::kDataLoss) {
    // A corrupt checkpoint: the batches carry their leader epochs.
    epochs_.clear();
    for (auto& [base, segment] : segments_) {
      SegmentScanner scanner(segment->file(), 0, segment->size_bytes(),
                             SegmentScanner::Mode::kVerified, base);
      while (true) {
        CO_ASSIGN_OR_RETURN(std::optional<ScannedBatch> batch, co_await scanner.next());
        if (!batch.has_value() || batch->header.base_offset >= log_end_offset_) break;
        const int32_t epoch = batch->header.partition_leader_epoch;
        if (epoch >= 0 && epoch > epochs_.latest_epoch().value_or(-1)) {
          epochs_.assign(epoch, batch->header.base_offset);
        }
      }
    }
    rewrite = true;
  } else {
    co_return cache.status();
  }
  // Entries past the log's end were written ahead of batches a crash lost.
  rewrite |= epochs_.truncate_from_end(log_end_offset_);
  rewrite |= epochs_.truncate_from_start(log_start_offset_);
  if (rewrite) CO_RETURN_IF_ERROR(co_await write_leader_epochs());
  co_return absl::OkStatus();
}

io::Task<absl::Status> Log::write_leader_epochs() {
  co_return co_await write_leader_epoch_checkpoint(
      *disk_, join_path(dir_, std::string(kLeaderEpochCheckpointFileName)), epochs_);
}

void Log::complete_transaction(const CompletedTxn& txn, Segment* segment) {
  if (txn.aborted && segment != nullptr) {
    segment->append_aborted(AbortedTxn{txn.producer_id, txn.first_offset, txn.last_offset,
                                       producers_.last_stable_offset(txn)});
  }
  producers_.complete_txn(txn);
}

io::Task<absl::Status> Log::replay_producer_state(int64_t from, int64_t to,
                                                  int64_t txn_rebuild_from) {
  for (auto it = segments_.begin(); it != segments_.end(); ++it) {
    Segment& segment = *it->second;
    if (segment.next_offset() <= from || segment.base_offset() >= to) continue;
    CO_ASSIGN_OR_RETURN(std::optional<ScannedBatch> first, co_await segment.find_batch(from));
    if (!first.has_value()) continue;
    const uint64_t start = first->position;
    SegmentScanner scanner(segment.file(), start, segment.size_bytes(),
                           SegmentScanner::Mode::kVerified, first->header.base_offset);
    while (true) {
      absl::StatusOr<std::optional<ScannedBatch>> next = co_await scanner.next();
      if (!next.ok() && next.status().code() != absl::StatusCode::kInternal &&
          next.status().code() != absl::StatusCode::kResourceExhausted) {
        break;  // a bad tail: recovery has dealt with it, or will
      }
      CO_ASSIGN_OR_RETURN(std::optional<ScannedBatch> batch, std::move(next));
      if (!batch.has_value() || batch->header.base_offset >= to) break;
      if (batch->header.last_offset() < from || batch->header.producer_id < 0) continue;
      absl::StatusOr<std::optional<EndTxnMarkerInfo>> marker =
          marker_of(net::BatchView{batch->header, batch->bytes});
      ProducerAppend append = producers_.begin_append(AppendOrigin::kRecovery);
      AddBatchResult added =
          append.add_batch(batch->header, marker.ok() ? *marker : std::nullopt);
      if (!added.ok()) continue;
      producers_.commit(std::move(append));
      producers_.update_map_end_offset(batch->header.next_offset());
      if (added.completed.has_value()) {
        complete_transaction(*added.completed,
                             segment.base_offset() >= txn_rebuild_from ? &segment : nullptr);
      }
    }
  }
  co_return absl::OkStatus();
}

io::Task<absl::Status> Log::rebuild_producer_state(int64_t txn_rebuild_from) {
  CO_ASSIGN_OR_RETURN(std::vector<std::string> names, co_await disk_->list(dir_));
  std::vector<int64_t> snapshots;
  for (const std::string& name : names) {
    if (std::optional<int64_t> offset = parse_offset_file_name(name, kSnapshotFileSuffix)) {
      if (*offset > log_end_offset_) {
        CO_RETURN_IF_ERROR(co_await disk_->remove(join_path(dir_, name)));
        dir_dirty_ = true;
      } else {
        snapshots.push_back(*offset);
      }
    }
  }
  producers_.truncate_fully_and_start_at(log_start_offset_);
  int64_t from = log_start_offset_;
  for (auto& [base, segment] : segments_) {
    if (base >= txn_rebuild_from) segment->clear_txn_index();
  }
  // The newest snapshot that loads wins; older ones are fallbacks. A
  // transaction index rebuild needs the replay to start at or before it.
  for (auto it = snapshots.rbegin(); it != snapshots.rend(); ++it) {
    if (*it > txn_rebuild_from) continue;
    if (*it < log_start_offset_) break;
    absl::StatusOr<io::Buffer> bytes = co_await read_snapshot_file(*disk_, dir_, *it);
    if (!bytes.ok() && bytes.status().code() != absl::StatusCode::kNotFound &&
        bytes.status().code() != absl::StatusCode::kDataLoss) {
      co_return bytes.status();
    }
    if (bytes.ok() && producers_.load_snapshot(bytes->span(), *it).ok()) {
      from = *it;
      break;
    }
  }
  CO_RETURN_IF_ERROR(co_await replay_producer_state(from, log_end_offset_, txn_rebuild_from));
  producers_.update_map_end_offset(log_end_offset_);
  producers_.truncate_head(log_start_offset_);
  if (dir_dirty_) {
    CO_RETURN_IF_ERROR(co_await disk_->sync_dir(dir_));
    dir_dirty_ = false;
  }
  co_return absl::OkStatus();
}

// --- appends -----------------------------------------------------------------

io::Task<absl::StatusOr<AppendResult>> Log::append_as_leader(io::Buffer records,
                                                            int32_t leader_epoch,
                                                            AppendOrigin origin) {
  BROOK_ASSERT(origin == AppendOrigin::kClient || origin == AppendOrigin::kCoordinator);
  absl::StatusOr<AppendResult> result;
  {
    auto lock = co_await append_mutex_.lock();
    result = co_await append_locked(std::move(records), leader_epoch, origin);
  }
  // A duplicate is answered with the first append's offsets, which that
  // append may still be syncing: it waits for them to be durable too (and
  // fails with them), or a retry would be acknowledged for records a crash
  // can still take.
  if (result.ok() && result->ok() && config_.flush_mode == FlushMode::kBeforeAck) {
    CO_RETURN_IF_ERROR(co_await flush(result->last_offset + 1));
  }
  co_return result;
}

io::Task<absl::StatusOr<AppendResult>> Log::append_as_follower(io::Buffer records, bool sync) {
  absl::StatusOr<AppendResult> result;
  {
    auto lock = co_await append_mutex_.lock();
    result = co_await append_locked(std::move(records), -1, AppendOrigin::kReplication);
  }
  if (sync && result.ok() && result->ok() && config_.flush_mode == FlushMode::kBeforeAck) {
    CO_RETURN_IF_ERROR(co_await flush(result->last_offset + 1));
  }
  co_return result;
}

io::Task<absl::StatusOr<int64_t>> Log::assign_leader_epoch(int32_t epoch) {
  auto lock = co_await append_mutex_.lock();
  if (offline()) co_return failure_;
  const int64_t end = log_end_offset_;
  if (epoch <= epochs_.latest_epoch().value_or(-1) || !epochs_.assign(epoch, end)) co_return end;
  if (absl::Status s = co_await write_leader_epochs(); !s.ok()) co_return fail(std::move(s));
  co_return end;
}

namespace {

// Per batch of an append, what validation learnt.
struct ValidatedBatch {
  net::BatchView view;
  size_t position = 0;  // in the append's bytes
  std::optional<EndTxnMarkerInfo> marker;
  int64_t max_timestamp_ms = -1;
};

// Kafka's LogValidator checks for one client batch (message format v2).
std::optional<Rejection> validate_client_batch(const net::BatchView& batch, const LogConfig& config,
                                               AppendOrigin origin, int64_t now_ms,
                                               std::vector<RecordError>* record_errors,
                                               int32_t batch_index, int64_t* max_timestamp_ms) {
  const net::RecordBatchHeader& h = batch.header;
  if (h.records_count <= 0) {
    return Rejection{net::Error::kInvalidRecord, "a batch must hold at least one record"};
  }
  if (static_cast<int64_t>(h.last_offset_delta) + 1 != h.records_count) {
    return Rejection{net::Error::kInvalidRecord,
                     fmt::format("batch has {} records but last offset delta {}", h.records_count,
                                 h.last_offset_delta)};
  }
  if (h.is_control() && origin == AppendOrigin::kClient) {
    return Rejection{net::Error::kInvalidRecord, "clients may not write control records"};
  }
  // (Coordinators write producers' transactional offset commits without
  // sequence numbers.)
  if (origin == AppendOrigin::kClient && h.producer_id >= 0 && h.base_sequence < 0 && !h.is_control()) {
    return Rejection{net::Error::kInvalidRecord,
                     fmt::format("invalid sequence number {} for producer {}", h.base_sequence,
                                 h.producer_id)};
  }
  // Every record is read (as Kafka's validator reads them), but none is
  // kept: a summary per record is all the checks need.
  *max_timestamp_ms = net::kNoTimestamp;
  std::optional<Rejection> rejection;
  int32_t i = 0;
  const absl::Status walked = net::visit_records(
      batch.bytes, kValidationDecompressedBytesMax, [&](const net::RecordSummary& r) {
        const int64_t ts = net::record_timestamp(h, r);
        *max_timestamp_ms = std::max(*max_timestamp_ms, ts);
        if (r.offset_delta != i) {
          record_errors->push_back({batch_index, i, "record offset out of order"});
          rejection = Rejection{net::Error::kInvalidRecord,
                                fmt::format("record {} has offset delta {}", i, r.offset_delta)};
          return false;
        }
        if (config.cleanup_compact && !h.is_control() && !r.has_key) {
          record_errors->push_back(
              {batch_index, i, "compacted topic cannot accept message without key"});
          rejection = Rejection{net::Error::kInvalidRecord,
                                "compacted topic cannot accept message without key"};
          return false;
        }
        if (config.timestamp_type == net::TimestampType::kCreateTime &&
            ((config.timestamp_before_max_ms != kNoLimit &&
              ts < now_ms - config.timestamp_before_max_ms) ||
             (config.timestamp_after_max_ms != kNoLimit &&
              ts > now_ms + config.timestamp_after_max_ms))) {
          record_errors->push_back({batch_index, i, fmt::format("timestamp {} out of range", ts)});
          rejection = Rejection{net::Error::kInvalidTimestamp,
                                fmt::format("timestamp {} of record {} is out of range", ts, i)};
          return false;
        }
        ++i;
        return true;
      });
  if (!walked.ok()) return rejection_for(walked);
  return rejection;
}

}  // namespace

io::Task<absl::StatusOr<AppendResult>> Log::append_locked(io::Buffer records, int32_t leader_epoch,
                                                          AppendOrigin origin) {
  if (offline()) co_return failure_;
  const bool leader = origin != AppendOrigin::kReplication;
  AppendResult result;
  result.log_start_offset = log_start_offset_;
  const int64_t now = now_ms();

  // 1. Parse and validate every batch.
  std::vector<ValidatedBatch> batches;
  {
    net::BatchIterator it(records, {net::CrcCheck::kVerify, net::PartialBatch::kReject,
                                    leader ? config_.max_message_bytes : SIZE_MAX});
    while (true) {
      const size_t position = it.position();
      absl::StatusOr<std::optional<net::BatchView>> next = it.next();
      if (!next.ok()) {
        const Rejection r = rejection_for(next.status());
        result.error = r.error;
        result.error_message = r.message;
        co_return result;
      }
      if (!next->has_value()) break;
      ValidatedBatch batch{std::move(**next), position, std::nullopt, -1};
      if (leader) {
        if (std::optional<Rejection> r =
                validate_client_batch(batch.view, config_, origin, now, &result.record_errors,
                                      static_cast<int32_t>(batches.size()),
                                      &batch.max_timestamp_ms)) {
          result.error = r->error;
          result.error_message = r->message;
          co_return result;
        }
      }
      absl::StatusOr<std::optional<EndTxnMarkerInfo>> marker = marker_of(batch.view);
      if (!marker.ok()) {
        result.error = net::Error::kCorruptMessage;
        result.error_message = std::string(marker.status().message());
        co_return result;
      }
      batch.marker = *marker;
      batches.push_back(std::move(batch));
    }
  }
  if (batches.empty()) co_return result;

  // 2. An idempotent producer's retry is answered with the first append.
  if (origin == AppendOrigin::kClient) {
    for (const ValidatedBatch& b : batches) {
      if (b.view.header.producer_id < 0) continue;
      if (std::optional<BatchMetadata> dup = producers_.find_duplicate(b.view.header)) {
        result.duplicate = true;
        result.first_offset = dup->first_offset();
        result.last_offset = dup->last_offset;
        result.max_timestamp_ms = dup->timestamp_ms;
        co_return result;
      }
    }
  }

  // 3. Offsets. Leaders assign them: each batch is written as a rewritten
  // copy of its header followed by the client's bytes after the header, so
  // the records are never copied. Followers keep the leader's offsets, which
  // must follow the log end.
  io::BufferChain bytes;
  int64_t next_offset = log_end_offset_;
  const bool log_append_time = config_.timestamp_type == net::TimestampType::kLogAppendTime;
  if (leader) {
    io::Buffer headers = io::Buffer::allocate(batches.size() * net::kBatchHeaderBytes);
    std::byte* const headers_out = headers.mutable_data();
    for (size_t i = 0; i < batches.size(); ++i) {
      ValidatedBatch& b = batches[i];
      net::RecordBatchHeader& h = b.view.header;
      std::byte* out = headers_out + i * net::kBatchHeaderBytes;
      std::memcpy(out, records.data() + b.position, net::kBatchHeaderBytes);
      const io::Buffer body =
          records.slice(b.position + net::kBatchHeaderBytes, h.size_bytes() - net::kBatchHeaderBytes);
      h.base_offset = next_offset;
      h.partition_leader_epoch = leader_epoch;
      codec::store_be<int64_t>(out + net::kBatchBaseOffsetOffset, h.base_offset);
      codec::store_be<int32_t>(out + net::kBatchPartitionLeaderEpochOffset, leader_epoch);
      bool rewritten = false;
      if (log_append_time && !h.is_control()) {
        h.attributes = static_cast<int16_t>(h.attributes | net::kBatchTimestampTypeBit);
        h.max_timestamp = now;
        codec::store_be<int16_t>(out + net::kBatchAttributesOffset, h.attributes);
        rewritten = true;
      } else if (!h.is_control() && b.max_timestamp_ms != h.max_timestamp &&
                 h.timestamp_type() == net::TimestampType::kCreateTime) {
        // The header's maxTimestamp is the client's claim: store the
        // records' own largest timestamp, as Kafka does.
        h.max_timestamp = b.max_timestamp_ms;
        rewritten = true;
      }
      if (rewritten) {
        codec::store_be<int64_t>(out + net::kBatchMaxTimestampOffset, h.max_timestamp);
        // The CRC covers the attributes onwards: the rest of the header,
        // then the body.
        const std::span<const std::byte> covered(out + net::kBatchAttributesOffset,
                                                 net::kBatchHeaderBytes - net::kBatchAttributesOffset);
        h.crc = codec::crc32c(codec::crc32c(0, covered), body.span());
        codec::store_be<uint32_t>(out + net::kBatchCrcOffset, h.crc);
      }
      bytes.append(headers.slice(i * net::kBatchHeaderBytes, net::kBatchHeaderBytes));
      bytes.append(body);
      next_offset = h.next_offset();
    }
    if (log_append_time) result.log_append_time_ms = now;
  } else {
    bytes.append(records);
    for (const ValidatedBatch& b : batches) {
      if (b.view.header.base_offset < next_offset) {
        result.error = net::Error::kInvalidRecord;
        result.error_message = fmt::format("batch at offset {} is below the log end offset {}",
                                           b.view.header.base_offset, next_offset);
        co_return result;
      }
      next_offset = b.view.header.next_offset();
    }
  }

  // 4. Producer state: epochs, sequences, transactions.
  ProducerAppend producer_append = producers_.begin_append(origin);
  std::vector<CompletedTxn> completed;
  for (const ValidatedBatch& b : batches) {
    AddBatchResult added = producer_append.add_batch(b.view.header, b.marker);
    if (!added.ok()) {
      result.error = added.error;
      result.error_message = std::move(added.message);
      co_return result;
    }
    if (added.completed.has_value()) completed.push_back(*added.completed);
  }

  // 5. The leader epoch of the first new offset, durable before the batches
  // (an entry past the log end after a crash is trimmed at load).
  bool epochs_changed = false;
  for (const ValidatedBatch& b : batches) {
    const int32_t epoch = b.view.header.partition_leader_epoch;
    if (epoch >= 0 && epoch > epochs_.latest_epoch().value_or(-1)) {
      epochs_changed |= epochs_.assign(epoch, b.view.header.base_offset);
    }
  }
  if (epochs_changed) {
    if (absl::Status s = co_await write_leader_epochs(); !s.ok()) co_return fail(std::move(s));
  }

  // 6. Roll when the active segment cannot take the batches, then write.
  std::vector<BatchSummary> summaries;
  summaries.reserve(batches.size());
  int64_t max_timestamp = net::kNoTimestamp;
  int64_t offset_of_max = -1;
  for (const ValidatedBatch& b : batches) {
    const net::RecordBatchHeader& h = b.view.header;
    summaries.push_back({h.base_offset, h.last_offset(), h.max_timestamp,
                         static_cast<uint32_t>(h.size_bytes())});
    if (h.max_timestamp > max_timestamp) {
      max_timestamp = h.max_timestamp;
      offset_of_max = h.last_offset();
    }
    result.records += static_cast<uint64_t>(h.records_count);
  }
  const size_t appended_bytes = bytes.size();
  const RollCheck check{appended_bytes, max_timestamp, next_offset - 1, now};
  if (active().should_roll(config_, check) ||
      next_offset - 1 - active().base_offset() > std::numeric_limits<int32_t>::max()) {
    CO_RETURN_IF_ERROR(co_await roll_locked());
  }
  if (absl::Status s = co_await active().append(summaries, std::move(bytes)); !s.ok()) {
    co_return fail(std::move(s));
  }

  // 7. The batches are in the log: publish them.
  producers_.commit(std::move(producer_append));
  log_end_offset_ = next_offset;
  producers_.update_map_end_offset(log_end_offset_);
  for (const CompletedTxn& txn : completed) complete_transaction(txn, &active());
  unflushed_records_ += static_cast<int64_t>(result.records);

  result.first_offset = batches.front().view.header.base_offset;
  result.last_offset = next_offset - 1;
  result.max_timestamp_ms = max_timestamp;
  result.offset_of_max_timestamp = offset_of_max;
  result.batches = static_cast<uint32_t>(batches.size());
  result.bytes = appended_bytes;
  if (unflushed_records_ >= config_.flush_messages) {
    CO_RETURN_IF_ERROR(co_await flush(log_end_offset_));
  }
  co_return result;
}

// --- segments: roll, flush, truncation, deletion -----------------------------

io::Task<absl::Status> Log::roll() {
  auto lock = co_await append_mutex_.lock();
  co_return co_await roll_locked();
}

io::Task<absl::Status> Log::roll_locked() {
  if (offline()) co_return failure_;
  if (active().empty() && active().base_offset() == log_end_offset_) co_return absl::OkStatus();
  // The finished segment is made durable before its successor's name can
  // be: a surviving successor then proves its predecessor whole, and
  // recovery never sees a hole.
  if (absl::Status s = co_await active().sync(); !s.ok()) co_return fail(std::move(s));
  active().on_become_inactive();
  co_await active().release_preallocation();
  const int64_t base = log_end_offset_;
  absl::StatusOr<std::unique_ptr<Segment>> segment =
      co_await Segment::create(*disk_, dir_, base, config_, now_ms());
  if (!segment.ok()) co_return fail(segment.status());
  segments_.emplace(base, std::move(*segment));
  dir_dirty_ = true;
  // A snapshot of producer state at the segment boundary bounds the replay
  // after a crash to the active segment.
  if (absl::Status s = co_await producers_.write_snapshot_file(*disk_, dir_, base); !s.ok()) {
    co_return fail(std::move(s));
  }
  co_return co_await flush(base);
}

io::Task<absl::Status> Log::flush(int64_t offset) {
  while (true) {
    if (offline()) co_return failure_;
    if (offset <= recovery_point_) co_return absl::OkStatus();
    if (!flushing_) break;
    co_await flush_done_.wait();
  }
  flushing_ = true;
  const int64_t target = log_end_offset_;
  absl::Status status;
  // Copies: retention or compaction may change the map while a datasync
  // runs. They work on segments below the active one, which the roll that
  // ended each made durable (not in this list); a truncation, which may
  // remove any segment, waits for the flush to end.
  std::vector<std::shared_ptr<Segment>> to_sync;
  for (auto& [base, segment] : segments_) {
    if (base >= target && base != active().base_offset()) break;
    if (segment->next_offset() <= recovery_point_ && segment->indexes_persisted()) continue;
    to_sync.push_back(segment);
  }
  const Segment* active_segment = &active();
  for (const std::shared_ptr<Segment>& segment : to_sync) {
    status = co_await segment->sync();
    if (status.ok() && segment.get() != active_segment && !segment->indexes_persisted()) {
      status = co_await segment->persist_indexes();
      dir_dirty_ = true;  // the index files' renames
    }
    if (!status.ok()) break;
  }
  if (status.ok() && dir_dirty_) {
    dir_dirty_ = false;
    status = co_await disk_->sync_dir(dir_);
  }
  flushing_ = false;
  flush_done_.notify_all();
  if (!status.ok()) co_return fail(std::move(status));
  recovery_point_ = std::max(recovery_point_, std::min(target, log_end_offset_));
  unflushed_records_ = 0;
  last_flush_ = clock_->now();
  co_return absl::OkStatus();
}

io::Task<absl::Status> Log::maybe_flush_by_time() {
  if (config_.flush_ms == kNoLimit || log_end_offset_ <= recovery_point_) co_return absl::OkStatus();
  if (clock_->now() - last_flush_ < std::chrono::milliseconds(config_.flush_ms)) {
    co_return absl::OkStatus();
  }
  co_return co_await flush(log_end_offset_);
}

io::Task<void> Log::start_writeback() {
  // No segment while a full truncation replaces them (it does not hold
  // this caller off: writeback is a hint).
  if (offline() || segments_.empty()) co_return;
  const std::shared_ptr<Segment> segment = segments_.rbegin()->second;  // kept alive meanwhile
  co_await segment->start_writeback();
}

io::Task<absl::Status> Log::remove_segments_from(
    std::map<int64_t, std::shared_ptr<Segment>>::iterator it) {
  // Newest first: a crash keeps a prefix of the removals, so the log left
  // behind has no hole.
  std::vector<std::shared_ptr<Segment>> doomed;
  for (auto at = it; at != segments_.end(); ++at) doomed.push_back(at->second);
  segments_.erase(it, segments_.end());
  for (auto at = doomed.rbegin(); at != doomed.rend(); ++at) {
    dir_dirty_ = true;
    CO_RETURN_IF_ERROR(co_await (*at)->remove_files());
  }
  co_return absl::OkStatus();
}

io::Task<absl::Status> Log::truncate_to(int64_t offset) {
  BROOK_ASSERT(offset >= 0);
  auto lock = co_await append_mutex_.lock();
  co_return co_await truncate_locked(offset);
}

io::Task<absl::Status> Log::truncate_locked(int64_t offset) {
  if (offline()) co_return failure_;
  if (offset >= log_end_offset_) {
    // No records go, but an epoch that starts at the log end without a
    // record (this replica became leader and appended nothing before it
    // followed again) conflicts with the leader's log: it goes (Kafka's
    // truncateTo does the same).
    if (epochs_.truncate_from_end(log_end_offset_)) {
      if (absl::Status s = co_await write_leader_epochs(); !s.ok()) co_return fail(std::move(s));
    }
    co_return absl::OkStatus();
  }
  if (offset <= segments_.begin()->first) co_return co_await truncate_fully_locked(offset);
  if (!co_await hold_off_flushes()) co_return failure_;
  // Lowered first (once a flush under way has ended, which may raise it):
  // whatever part of the truncation happens, nothing past the offset counts
  // as durable any more.
  recovery_point_ = std::min(recovery_point_, offset);
  absl::Status status = co_await remove_segments_from(segments_.upper_bound(offset));
  if (status.ok()) status = co_await disk_->sync_dir(dir_);
  if (status.ok()) {
    dir_dirty_ = false;
    absl::StatusOr<uint64_t> removed = co_await active().truncate_to(offset);
    if (!removed.ok()) status = removed.status();
  }
  release_flushes();
  if (!status.ok()) co_return fail(std::move(status));
  log_end_offset_ = active().next_offset();
  recovery_point_ = std::min(recovery_point_, log_end_offset_);
  high_watermark_ = std::min(high_watermark_, log_end_offset_);
  log_start_offset_ = std::min(log_start_offset_, log_end_offset_);
  if (absl::Status s = co_await rebuild_producer_state(); !s.ok()) co_return fail(std::move(s));
  if (epochs_.truncate_from_end(log_end_offset_)) {
    if (absl::Status s = co_await write_leader_epochs(); !s.ok()) co_return fail(std::move(s));
  }
  co_return absl::OkStatus();
}

io::Task<bool> Log::hold_off_flushes() {
  while (flushing_) co_await flush_done_.wait();
  if (offline()) co_return false;  // that flush failed
  flushing_ = true;
  co_return true;
}

void Log::release_flushes() {
  flushing_ = false;
  flush_done_.notify_all();
}

io::Task<absl::Status> Log::truncate_fully_and_start_at(int64_t offset) {
  BROOK_ASSERT(offset >= 0);
  auto lock = co_await append_mutex_.lock();
  co_return co_await truncate_fully_locked(offset);
}

io::Task<absl::Status> Log::truncate_fully_locked(int64_t offset) {
  if (offline()) co_return failure_;
  if (!co_await hold_off_flushes()) co_return failure_;
  absl::Status status = co_await replace_segments(offset);
  release_flushes();
  if (!status.ok()) co_return fail(std::move(status));
  dir_dirty_ = false;
  co_return absl::OkStatus();
}

io::Task<absl::Status> Log::replace_segments(int64_t offset) {
  recovery_point_ = std::min(recovery_point_, offset);
  absl::Status status = co_await remove_segments_from(segments_.begin());
  if (status.ok()) {
    absl::StatusOr<std::unique_ptr<Segment>> segment =
        co_await Segment::create(*disk_, dir_, offset, config_, now_ms());
    if (segment.ok()) {
      segments_.emplace(offset, std::move(*segment));
    } else {
      status = segment.status();
    }
  }
  log_start_offset_ = log_end_offset_ = recovery_point_ = high_watermark_ = offset;
  epochs_.clear();
  if (status.ok()) status = co_await rebuild_producer_state();
  if (status.ok()) status = co_await write_leader_epochs();
  if (status.ok()) status = co_await disk_->sync_dir(dir_);
  co_return status;
}

io::Task<absl::StatusOr<net::Error>> Log::delete_records_before(int64_t offset) {
  if (offline()) co_return failure_;
  if (offset > high_watermark_ || offset < 0) co_return net::Error::kOffsetOutOfRange;
  if (offset > log_start_offset_) {
    log_start_offset_ = offset;
    producers_.truncate_head(log_start_offset_);
    if (epochs_.truncate_from_start(log_start_offset_)) {
      if (absl::Status s = co_await write_leader_epochs(); !s.ok()) co_return fail(std::move(s));
    }
  }
  co_return net::Error::kNone;
}

io::Task<absl::Status> Log::delete_segments_before(int64_t base_offset_end) {
  std::vector<std::shared_ptr<Segment>> doomed;
  while (segments_.size() > 1 && segments_.begin()->first < base_offset_end) {
    auto next = std::next(segments_.begin());
    if (next->first > base_offset_end) break;
    doomed.push_back(segments_.begin()->second);
    segments_.erase(segments_.begin());
  }
  if (doomed.empty()) co_return absl::OkStatus();
  log_start_offset_ = std::max(log_start_offset_, segments_.begin()->first);
  producers_.truncate_head(log_start_offset_);
  if (epochs_.truncate_from_start(log_start_offset_)) {
    if (absl::Status s = co_await write_leader_epochs(); !s.ok()) co_return fail(std::move(s));
  }
  for (const std::shared_ptr<Segment>& segment : doomed) {
    if (absl::Status s = co_await segment->remove_files(); !s.ok()) co_return fail(std::move(s));
  }
  // Snapshots below the new start are useless.
  CO_ASSIGN_OR_RETURN(std::vector<std::string> names, co_await disk_->list(dir_));
  for (const std::string& name : names) {
    std::optional<int64_t> at = parse_offset_file_name(name, kSnapshotFileSuffix);
    if (at.has_value() && *at < log_start_offset_) {
      if (absl::Status s = co_await disk_->remove(join_path(dir_, name)); !s.ok()) {
        co_return fail(std::move(s));
      }
    }
  }
  if (absl::Status s = co_await disk_->sync_dir(dir_); !s.ok()) co_return fail(std::move(s));
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<size_t>> Log::delete_old_segments() {
  auto lock = co_await append_mutex_.lock();
  if (offline()) co_return failure_;
  const int64_t now = now_ms();
  // Segments are deletable in order while one of the rules holds, and only
  // when all their records are below the high watermark.
  uint64_t size_excess = 0;
  if (config_.cleanup_delete && config_.retention_bytes >= 0 &&
      size_bytes() > static_cast<uint64_t>(config_.retention_bytes)) {
    size_excess = size_bytes() - static_cast<uint64_t>(config_.retention_bytes);
  }
  int64_t end = segments_.begin()->first;
  size_t count = 0;
  for (auto it = segments_.begin(); it != segments_.end(); ++it) {
    const Segment& segment = *it->second;
    auto next = std::next(it);
    const int64_t next_base = next == segments_.end() ? log_end_offset_ : next->first;
    if (next_base > high_watermark_ || segment.empty()) break;
    const bool below_start = next_base <= log_start_offset_;
    const bool expired = config_.cleanup_delete && config_.retention_ms >= 0 &&
                         segment.max_timestamp_ms() != net::kNoTimestamp &&
                         now - segment.max_timestamp_ms() > config_.retention_ms;
    const bool oversize = size_excess >= segment.size_bytes() && size_excess > 0;
    if (!below_start && !expired && !oversize) break;
    if (oversize) size_excess -= segment.size_bytes();
    end = next_base;
    ++count;
  }
  if (count == 0) co_return size_t{0};
  if (end >= log_end_offset_ && !active().empty()) {
    // Every segment goes, the active one too: roll so the log keeps one.
    CO_RETURN_IF_ERROR(co_await roll_locked());
  }
  CO_RETURN_IF_ERROR(co_await delete_segments_before(end));
  co_return count;
}

// --- compaction --------------------------------------------------------------

int64_t Log::first_uncleanable_offset() const {
  // Not past the last stable offset, which is at most the high watermark:
  // a record not yet replicated may still be truncated, and must not have
  // displaced an older record of its key meanwhile.
  int64_t end = std::min(active().base_offset(), last_stable_offset());
  if (config_.min_compaction_lag_ms > 0) {
    const int64_t now = now_ms();
    for (const auto& [base, segment] : segments_) {
      if (segment->max_timestamp_ms() != net::kNoTimestamp &&
          now - segment->max_timestamp_ms() < config_.min_compaction_lag_ms) {
        end = std::min(end, base);
        break;
      }
    }
  }
  return end;
}

double Log::dirty_ratio() const {
  uint64_t dirty = 0;
  uint64_t total = 0;
  for (const auto& [base, segment] : segments_) {
    total += segment->size_bytes();
    if (segment->next_offset() > cleaner_position_) dirty += segment->size_bytes();
  }
  return total == 0 ? 0 : static_cast<double>(dirty) / static_cast<double>(total);
}

io::Task<absl::StatusOr<io::Buffer>> Log::read_segment_bytes(Segment& segment) {
  const uint64_t size = segment.size_bytes();
  CO_ASSIGN_OR_RETURN(io::Buffer bytes, co_await segment.file().read_at(0, size));
  if (bytes.size() != size) co_return absl::DataLossError("short read of a segment");
  co_return bytes;
}

io::Task<absl::Status> Log::replace_segment(const std::shared_ptr<Segment>& old, io::Buffer cleaned,
                                            const std::vector<AbortedTxnRange>& aborted) {
  const int64_t base = old->base_offset();
  const std::string path = join_path(dir_, offset_file_name(base, kLogSuffix));
  const std::string temp = path + std::string(kCleanedSuffix);
  {
    CO_ASSIGN_OR_RETURN(std::unique_ptr<io::File> f, co_await disk_->open(temp, io::OpenMode::kCreate));
    if (f->size() > 0) CO_RETURN_IF_ERROR(co_await f->truncate(0));
    if (!cleaned.empty()) CO_RETURN_IF_ERROR(co_await f->write_at(0, io::BufferChain(cleaned)));
    CO_RETURN_IF_ERROR(co_await f->datasync());
    CO_RETURN_IF_ERROR(co_await f->close());
  }
  // The old index files go first: whichever prefix of these directory
  // operations a crash keeps, no index describes the wrong log bytes.
  CO_RETURN_IF_ERROR(co_await old->remove_index_files());
  CO_RETURN_IF_ERROR(co_await disk_->rename(temp, path));
  CO_RETURN_IF_ERROR(co_await disk_->sync_dir(dir_));
  CO_ASSIGN_OR_RETURN(std::unique_ptr<Segment> fresh,
                      co_await Segment::open(*disk_, dir_, base, config_, now_ms()));
  CO_RETURN_IF_ERROR(co_await fresh->rebuild_indexes());
  fresh->set_next_offset(old->next_offset());
  for (const AbortedTxnRange& txn : aborted) {
    fresh->append_aborted(
        AbortedTxn{txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset});
  }
  CO_RETURN_IF_ERROR(co_await fresh->sync());
  CO_RETURN_IF_ERROR(co_await fresh->persist_indexes());
  CO_RETURN_IF_ERROR(co_await disk_->sync_dir(dir_));
  segments_[base] = std::move(fresh);
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<CompactionResult>> Log::compact(size_t offset_map_bytes) {
  auto lock = co_await append_mutex_.lock();
  if (offline()) co_return failure_;
  CompactionResult result;
  if (!config_.cleanup_compact) co_return result;
  const int64_t end = first_uncleanable_offset();
  const int64_t dirty_start = std::max(cleaner_position_, log_start_offset_);
  result.cleaned_up_to = cleaner_position_;
  if (dirty_start >= end) co_return result;

  std::vector<AbortedTxnRange> aborted;
  for (const auto& [base, segment] : segments_) {
    for (const AbortedTxn& t : segment->txn_index().entries()) {
      aborted.push_back({t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset});
    }
  }
  // Copies: the map of segments changes as segments are replaced.
  std::vector<std::shared_ptr<Segment>> cleanable;
  for (const auto& [base, segment] : segments_) {
    if (base >= end || segment.get() == &active()) break;
    cleanable.push_back(segment);
  }

  // 1. The latest offset of every key in the dirty section.
  OffsetMap map(offset_map_bytes);
  TxnTracker map_txns;
  for (const std::shared_ptr<Segment>& segment : cleanable) {
    if (segment->next_offset() <= dirty_start) continue;
    absl::StatusOr<io::Buffer> bytes = co_await read_segment_bytes(*segment);
    if (!bytes.ok()) co_return fail(bytes.status());
    BuildMapOptions options{dirty_start, std::min(segment->next_offset(), end), aborted};
    CO_ASSIGN_OR_RETURN(BuildMapResult built,
                        build_offset_map(*bytes, options, map, map_txns));
    if (built.progress == MapProgress::kMapFull) break;
  }
  const int64_t round_end = map.latest_offset() + 1;
  if (round_end <= dirty_start) co_return result;

  // 2. Every segment below the round's end, cleaned against the map.
  ProducerLastRecords producers;
  for (const auto& [pid, entry] : producers_.producers()) {
    ProducerLastRecord last;
    if (entry.last_data_offset() >= 0) last.last_data_offset = entry.last_data_offset();
    last.producer_epoch = entry.producer_epoch;
    producers.emplace(pid, last);
  }
  TxnTracker clean_txns;
  CleanOptions options{now_ms(), config_.delete_retention_ms, aborted, producers, round_end};
  for (const std::shared_ptr<Segment>& segment : cleanable) {
    if (segment->base_offset() >= round_end) break;
    absl::StatusOr<io::Buffer> bytes = co_await read_segment_bytes(*segment);
    if (!bytes.ok()) co_return fail(bytes.status());
    CO_ASSIGN_OR_RETURN(CleanResult cleaned, clean_segment(*bytes, map, options, clean_txns));
    result.bytes_before += bytes->size();
    result.bytes_after += cleaned.bytes.size();
    result.records_removed += cleaned.records_removed;
    ++result.segments_cleaned;
    if (cleaned.bytes.size() == bytes->size() && cleaned.bytes == *bytes) continue;
    if (absl::Status s = co_await replace_segment(segment, std::move(cleaned.bytes),
                                                  cleaned.aborted_retained);
        !s.ok()) {
      co_return fail(std::move(s));
    }
  }
  cleaner_position_ = round_end;
  result.cleaned_up_to = round_end;
  co_return result;
}

// --- reads -------------------------------------------------------------------

int64_t Log::last_stable_offset() const {
  const std::optional<int64_t> unstable = producers_.first_unstable_offset();
  return unstable.has_value() ? std::min(*unstable, high_watermark_) : high_watermark_;
}

int64_t Log::bound_offset(ReadBound bound) const {
  switch (bound) {
    case ReadBound::kLogEnd:
      return log_end_offset_;
    case ReadBound::kHighWatermark:
      return high_watermark_;
    case ReadBound::kCommitted:
      return last_stable_offset();
  }
  BROOK_UNREACHABLE();
}

void Log::set_high_watermark(int64_t offset) {
  high_watermark_ = std::clamp(offset, log_start_offset_, log_end_offset_);
}

uint64_t Log::size_bytes() const {
  uint64_t total = 0;
  for (const auto& [base, segment] : segments_) total += segment->size_bytes();
  return total;
}

io::Task<absl::StatusOr<ReadResult>> Log::read(int64_t offset, size_t max_bytes, ReadBound bound,
                                               bool min_one_batch) {
  if (offline()) co_return failure_;
  ReadResult result;
  result.log_start_offset = log_start_offset_;
  result.high_watermark = high_watermark_;
  result.last_stable_offset = last_stable_offset();
  result.log_end_offset = log_end_offset_;
  if (offset < log_start_offset_ || offset > log_end_offset_) {
    result.error = net::Error::kOffsetOutOfRange;
    co_return result;
  }
  const int64_t limit = bound_offset(bound);
  if (offset >= limit) co_return result;
  auto it = segments_.upper_bound(offset);
  if (it != segments_.begin()) --it;
  // Hold the segments: a truncation or retention may drop them meanwhile.
  std::vector<std::shared_ptr<Segment>> candidates;
  for (; it != segments_.end() && it->first < limit; ++it) candidates.push_back(it->second);
  for (const std::shared_ptr<Segment>& segment : candidates) {
    // A read the disk corrupted must not leave the log: what is returned is
    // checked (CRC, offsets, epochs) and read again when it fails.
    // A leader epoch that disagrees with the epoch cache is believed when
    // two reads agree (the field lies outside the CRC, and a log may hold
    // epochs out of order); CRC and offset faults never are.
    absl::Status bad;
    std::optional<io::Buffer> suspect;
    int misses = 0;
    for (int attempt = 0; attempt <= kReadRereads; ++attempt) {
      CO_ASSIGN_OR_RETURN(std::optional<ScannedBatch> batch, co_await segment->find_batch(offset));
      if (!batch.has_value()) {
        // A scan that read a corrupted header may miss the batch: believe
        // "no batch here" only when every scan says so (a scan reads many
        // headers, so two corrupted scans in a row are not rare enough).
        if (++misses <= kReadRereads && attempt < kReadRereads) continue;
        break;
      }
      if (batch->header.last_offset() >= limit) co_return result;
      CO_ASSIGN_OR_RETURN(io::Buffer records,
                          co_await segment->read(batch->position, max_bytes, limit, min_one_batch));
      bool believable = false;
      bad = check_read(records, offset, batch->header.base_offset, &believable);
      if (!bad.ok()) {
        if (!believable) continue;
        if (!suspect.has_value() || suspect->view() != records.view()) {
          suspect = std::move(records);
          continue;
        }
        bad = absl::OkStatus();
      }
      result.records = std::move(records);
      if (bound == ReadBound::kCommitted && !result.records.empty()) {
        collect_aborted(offset, last_offset_of(result.records) + 1, &result.aborted_transactions);
      }
      co_return result;
    }
    if (!bad.ok()) {
      co_return absl::DataLossError(fmt::format("{}: reading offset {}: {} (after {} reads)", dir_,
                                                offset, std::string(bad.message()), kReadRereads + 1));
    }
  }
  co_return result;
}

absl::Status Log::check_read(const io::Buffer& records, int64_t offset, int64_t first_base,
                             bool* believable) const {
  *believable = false;
  net::BatchIterator it(records);
  // Faults a correct log can show (believed when two reads agree).
  absl::Status believable_fault;
  int64_t expected = first_base;
  bool first = true;
  while (true) {
    ASSIGN_OR_RETURN(std::optional<net::BatchView> next, it.next());
    if (!next.has_value()) break;
    const net::RecordBatchHeader& h = next->header;
    if (h.base_offset != expected && !(first == false && h.base_offset > expected)) {
      return absl::DataLossError(
          fmt::format("batch at offset {} where {} was expected", h.base_offset, expected));
    }
    if (first && h.last_offset() < offset) {
      return absl::DataLossError(
          fmt::format("first batch ends at {}, before offset {}", h.last_offset(), offset));
    }
    if (first && h.base_offset > offset && believable_fault.ok()) {
      // The batch holding `offset` may have been passed over on a header
      // the disk corrupted while the segment was scanned.
      believable_fault = absl::DataLossError(
          fmt::format("first batch starts at {}, after offset {}", h.base_offset, offset));
    }
    {
      const std::optional<int32_t> epoch = epochs_.epoch_for_offset(h.base_offset);
      if (epoch.has_value() && *epoch != h.partition_leader_epoch && believable_fault.ok()) {
        believable_fault = absl::DataLossError(fmt::format("batch at offset {} has leader epoch {}, not {}",
                                                      h.base_offset, h.partition_leader_epoch, *epoch));
      }
    }
    expected = h.next_offset();
    first = false;
  }
  if (it.partial_bytes() != 0) return absl::DataLossError("a partial batch");
  *believable = !believable_fault.ok();
  return believable_fault;
}

int64_t Log::last_offset_of(const io::Buffer& records) {
  int64_t last = -1;
  size_t at = 0;
  while (at < records.size()) {
    absl::StatusOr<net::RecordBatchHeader> h =
        net::parse_batch_header(records.span().subspan(at), net::BatchExtent::kHeaderOnly);
    if (!h.ok()) break;
    last = h->last_offset();
    at += h->size_bytes();
  }
  return last;
}

void Log::collect_aborted(int64_t fetch_offset, int64_t upper_bound,
                          std::vector<AbortedTxn>* out) const {
  // From the segment holding the fetch offset on, until an index shows the
  // search is complete (an entry whose last stable offset reaches the bound).
  auto it = segments_.upper_bound(fetch_offset);
  if (it != segments_.begin()) --it;
  for (; it != segments_.end(); ++it) {
    if (it->second->txn_index().collect_aborted(fetch_offset, upper_bound, out)) return;
  }
}

io::Task<absl::StatusOr<std::optional<TimestampOffset>>> Log::offset_for_timestamp(int64_t ts) {
  if (offline()) co_return failure_;
  std::vector<std::shared_ptr<Segment>> candidates;
  for (const auto& [base, segment] : segments_) {
    if (segment->max_timestamp_ms() >= ts) candidates.push_back(segment);
  }
  for (const std::shared_ptr<Segment>& segment : candidates) {
    const TimestampOffset hint = segment->time_index().lookup(ts);
    const int64_t from = std::max(hint.offset, log_start_offset_);
    CO_ASSIGN_OR_RETURN(std::optional<ScannedBatch> first, co_await segment->find_batch(from));
    if (!first.has_value()) continue;
    // A lookup lands near its batch: small reads.
    SegmentScanner scanner(segment->file(), first->position, segment->size_bytes(),
                           SegmentScanner::Mode::kWhole, std::nullopt, size_t{64} << 10);
    while (true) {
      CO_ASSIGN_OR_RETURN(std::optional<ScannedBatch> batch, co_await scanner.next());
      if (!batch.has_value()) break;
      if (batch->header.max_timestamp < ts || batch->header.is_control()) continue;
      CO_ASSIGN_OR_RETURN(std::vector<net::Record> records,
                          net::decode_records(batch->bytes, kValidationDecompressedBytesMax));
      for (const net::Record& r : records) {
        const int64_t record_ts = net::record_timestamp(batch->header, r);
        const int64_t record_offset = net::record_offset(batch->header, r);
        if (record_ts >= ts && record_offset >= log_start_offset_) {
          co_return TimestampOffset{record_ts, record_offset};
        }
      }
    }
  }
  co_return std::nullopt;
}

io::Task<absl::Status> Log::close() {
  if (closed_) co_return close_status_;
  closed_ = true;
  close_status_ = failure_;
  if (close_status_.ok()) {
    auto lock = co_await append_mutex_.lock();
    absl::Status status = co_await flush(log_end_offset_);
    if (status.ok()) status = co_await active().persist_indexes();
    if (status.ok()) status = co_await disk_->sync_dir(dir_);
    if (status.ok()) status = co_await producers_.write_snapshot_file(*disk_, dir_, log_end_offset_);
    if (status.ok()) co_await active().release_preallocation();
    if (!status.ok()) {
      close_status_ = fail(std::move(status));
    } else {
      // Whatever still runs against the log (a read, an append waiting for
      // the lock) is told so, and touches no closed file.
      failure_ = absl::FailedPreconditionError(fmt::format("log {} is closed", dir_));
    }
  }
  for (auto& [base, segment] : segments_) (void)co_await segment->close();
  co_return close_status_;
}

}  // namespace brook::storage
