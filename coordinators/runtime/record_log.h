// coordinators/runtime/record_log.h
//
// The records a coordinator's state is made of, and where they are written.
// A coordinator (group, transaction, share) keeps its state in the
// partitions of an internal compacted topic: every change is a record of
// the partition that owns the key, written and committed before the
// in-memory state takes it, and replayed to rebuild that state when this
// broker becomes the partition's leader.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "io/buffer.h"
#include "io/task.h"
#include "net/kafka/errors.h"

namespace brook::runtime {

// One record of a coordinator partition; no value deletes the key.
struct Record {
  io::Buffer key;
  std::optional<io::Buffer> value;
};

// Where a coordinator's records go: the broker's partitions of the
// coordinator's internal topic.
class RecordLog {
 public:
  struct Written {
    net::Error error = net::Error::kNone;
    int64_t base_offset = -1;  // the first record's offset when written
  };
  virtual ~RecordLog() = default;
  // Appends `records` to `partition` as its leader in `epoch`, in one batch
  // and in order, and returns once they are committed. NOT_COORDINATOR when
  // this broker no longer leads the partition in that epoch (or the append's
  // outcome is unknown); NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT and the like
  // when the write did not reach the ISR.
  virtual io::Task<Written> write(int32_t partition, int32_t epoch, std::vector<Record> records) = 0;
};

// Java's String.hashCode over the UTF-16 code units of `s` (ASCII and
// UTF-8 text as Java decodes it).
int32_t java_string_hash(std::string_view s);
// The partition of an internal topic with `partitions` partitions that owns
// `key` (a group id, a transactional id): Kafka's
// Utils.abs(key.hashCode) % partitions.
int32_t partition_for_key(std::string_view key, int32_t partitions);

}  // namespace brook::runtime
