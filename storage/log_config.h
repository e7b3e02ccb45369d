// storage/log_config.h
//
// LogConfig: the per-topic settings a partition log obeys, under Kafka's
// topic-level names (the broker-level defaults are the same names with a
// `log.` prefix, e.g. log.segment.bytes). Defaults are Kafka's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "net/kafka/record_batch.h"

namespace brook::storage {

inline constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

enum class FlushMode : uint8_t {
  // Kafka's default: replication is the durability; the log is synced in the
  // background by flush.messages / flush.ms and at segment roll.
  kBackground,
  // Every acknowledged append is synced first (group commit: appends that
  // arrive while a datasync runs share the next one).
  kBeforeAck,
};

struct LogConfig {
  // segment.bytes: roll when the active segment would grow past this.
  uint64_t segment_bytes = uint64_t{1} << 30;
  // segment.ms / segment.jitter.ms: roll once the active segment's first
  // batch is this old (wall time).
  int64_t segment_ms = 7 * 24 * 3600 * 1000LL;
  int64_t segment_jitter_ms = 0;
  // segment.index.bytes: the largest index; a full index rolls the segment.
  uint64_t segment_index_bytes = 10 * 1024 * 1024;
  // index.interval.bytes: bytes of log between index entries.
  uint64_t index_interval_bytes = 4096;
  // flush.messages / flush.ms: sync after this many unsynced records or
  // this long since the last sync (kNoLimit: never; leave it to replication).
  int64_t flush_messages = kNoLimit;
  int64_t flush_ms = kNoLimit;
  FlushMode flush_mode = FlushMode::kBackground;
  // retention.ms / retention.bytes (-1: unlimited) for cleanup.policy=delete.
  int64_t retention_ms = 7 * 24 * 3600 * 1000LL;
  int64_t retention_bytes = -1;
  // cleanup.policy: delete, compact, or both.
  bool cleanup_delete = true;
  bool cleanup_compact = false;
  // delete.retention.ms: how long tombstones and transaction markers stay
  // readable in a compacted log.
  int64_t delete_retention_ms = 24 * 3600 * 1000LL;
  // min.compaction.lag.ms / max.compaction.lag.ms / min.cleanable.dirty.ratio.
  int64_t min_compaction_lag_ms = 0;
  int64_t max_compaction_lag_ms = kNoLimit;
  double min_cleanable_dirty_ratio = 0.5;
  // max.message.bytes: the largest batch a client may append.
  size_t max_message_bytes = 1024 * 1024 + 12;
  // message.timestamp.type: CreateTime keeps the producer's timestamps;
  // LogAppendTime stamps each batch with the broker's wall clock.
  net::TimestampType timestamp_type = net::TimestampType::kCreateTime;
  // message.timestamp.before.max.ms / after.max.ms (KIP-937): how far a
  // CreateTime timestamp may lie before / after the broker's clock.
  int64_t timestamp_before_max_ms = kNoLimit;
  int64_t timestamp_after_max_ms = kNoLimit;
  // producer.id.expiration.ms: idle producers' state is dropped after this.
  int64_t producer_id_expiration_ms = 24 * 3600 * 1000LL;

  size_t offset_index_entries_max() const;
  size_t time_index_entries_max() const;
};

inline size_t LogConfig::offset_index_entries_max() const {
  const uint64_t n = segment_index_bytes / 8;
  return n == 0 ? 1 : static_cast<size_t>(n);
}
inline size_t LogConfig::time_index_entries_max() const {
  const uint64_t n = segment_index_bytes / 12;
  return n == 0 ? 1 : static_cast<size_t>(n);
}

}  // namespace brook::storage
