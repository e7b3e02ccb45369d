// coordinators/runtime/loader.h
//
// Loading and unloading coordinator shards as leadership of the internal
// topic's partitions moves: the broker reports the partitions it leads
// (with their leader epochs) after every metadata change; sync_leadership()
// begins the loads of the newly led ones and unloads the rest, and
// load_partition() replays a partition's records, from its log start to
// its end, into the coordinator.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/clock.h"
#include "io/log.h"
#include "io/task.h"
#include "net/kafka/errors.h"

namespace brook::runtime {

// What the runtime drives: a coordinator whose state is sharded by the
// partitions of its internal topic.
class Coordinator {
 public:
  virtual ~Coordinator() = default;
  // This broker leads `partition` in `epoch`: the shard's state is dropped
  // and requests for it wait for the load.
  virtual void begin_load(int32_t partition, int32_t epoch) = 0;
  // One record of the partition, in offset order. An error stops the load
  // (the partition cannot be served: it is damaged).
  virtual absl::Status replay(int32_t partition, int64_t offset, const std::optional<io::Buffer>& key,
                              const std::optional<io::Buffer>& value) = 0;
  // A record of a transactional batch of `producer_id`: it takes effect only
  // if a commit marker of that producer follows (replay_marker).
  virtual absl::Status replay_transactional(int32_t partition, int64_t offset, int64_t producer_id,
                                            const std::optional<io::Buffer>& key,
                                            const std::optional<io::Buffer>& value) {
    (void)producer_id;
    return replay(partition, offset, key, value);
  }
  // A commit (true) or abort marker of `producer_id` at `offset`.
  virtual void replay_marker(int32_t partition, int64_t offset, int64_t producer_id, bool commit) {
    (void)partition;
    (void)offset;
    (void)producer_id;
    (void)commit;
  }
  // The load of `partition` in `epoch` is complete (ignored if a newer
  // begin_load or an unload came meanwhile).
  virtual void finish_load(int32_t partition, int32_t epoch) = 0;
  // This broker no longer leads `partition`.
  virtual void unload(int32_t partition) = 0;
  // The epoch `partition` is served (or being loaded) in, if any.
  virtual std::optional<int32_t> loaded_epoch(int32_t partition) const = 0;
  virtual bool loading(int32_t partition) const = 0;
  // The partitions served or being loaded.
  virtual std::vector<int32_t> loaded_partitions() const = 0;
};

// A partition's records as the broker's log has them.
class PartitionReader {
 public:
  struct Chunk {
    // The requested offset is below the log start (retention moved it).
    bool out_of_range = false;
    // Whole record batches starting with the one holding the offset.
    io::Buffer records;
  };
  virtual ~PartitionReader() = default;
  // [log start, log end) of `partition`, or nullopt when it is not here.
  virtual std::optional<std::pair<int64_t, int64_t>> bounds(int32_t partition) = 0;
  virtual io::Task<absl::StatusOr<Chunk>> read(int32_t partition, int64_t offset, size_t max_bytes) = 0;
  // Returns once the records of `partition` below `end_offset` are
  // committed (the high watermark reached it: kNone, or
  // NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is below its minimum), or
  // NOT_COORDINATOR when this broker no longer leads it in `epoch`, or
  // REQUEST_TIMED_OUT.
  virtual io::Task<net::Error> wait_committed(int32_t partition, int32_t epoch, int64_t end_offset) = 0;
};

struct LeadershipChange {
  std::vector<int32_t> loads;     // begun: the caller runs load_partition for each
  std::vector<int32_t> unloaded;  // no longer led
};

// Brings the coordinator's shards in line with `led` (partition -> leader
// epoch of the partitions this broker leads now).
LeadershipChange sync_leadership(Coordinator& coordinator, const std::map<int32_t, int32_t>& led);

struct LoadOptions {
  // The most bytes one read takes.
  size_t read_bytes = size_t{1} << 20;
  // The largest decompressed batch accepted (coordinators write
  // uncompressed batches; larger ones come from a damaged or foreign log).
  size_t max_batch_bytes = size_t{64} << 20;
  // A read that fails, or finds nothing below the log end, is tried again
  // this many times this far apart before the load gives up.
  int read_retries = 100;
  io::Duration read_retry_backoff{std::chrono::milliseconds(50)};
};

// Replays `partition` (of `topic`, for the log lines) into the coordinator
// and finishes its load in `epoch`; stops quietly when the load is
// superseded (a newer epoch, an unload), and unloads the shard when the
// partition cannot be decoded, or read (after the retries). Records of
// transactional batches go to replay_transactional, and commit and abort
// markers to replay_marker; other control batches (leader changes) are
// skipped. A load never ends before the log end it started with unless the
// log was truncated below it meanwhile, and it finishes only once all it
// replayed is committed: records past the high watermark may still be
// truncated away (a later leader without them makes the followers drop
// them), so answers built on them could be undone, as an assignment handed
// out from a generation that then vanishes. (Kafka's coordinator runtime
// likewise holds its answers until the records they rest on commit.)
// While it waits the shard answers COORDINATOR_LOAD_IN_PROGRESS.
io::Task<void> load_partition(Coordinator& coordinator, PartitionReader& reader, const io::Clock& clock,
                              io::Logger& log, std::string topic, int32_t partition, int32_t epoch,
                              LoadOptions options = {});

}  // namespace brook::runtime
