// coordinators/runtime/batched_writer.h
//
// BatchedWriter: the write path of a coordinator's records. Writes that
// reach a partition while an append to it is under way queue, and the next
// append carries all of them in one record batch (up to `batch_bytes`, one
// leader epoch); each write then waits on its own until its records are
// committed, and learns its own offsets. An append whose outcome is unknown
// (its writer was cancelled mid-append, the log failed) fails every write
// it carried, as a write that timed out does: the caller cannot tell
// whether the records landed, and must not assume either.
//
// The broker supplies the appends (as the partition's leader) and the wait
// for the high watermark through BatchAppender.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "coordinators/runtime/record_log.h"
#include "io/sync.h"
#include "io/task.h"

namespace brook::runtime {

class BatchAppender {
 public:
  struct Appended {
    net::Error error = net::Error::kNone;
    int64_t first_offset = -1;
  };
  virtual ~BatchAppender() = default;
  // kNone when `partition` is led here in `epoch` with enough in-sync
  // replicas to take a write; else the error to answer.
  virtual net::Error check_leader(int32_t partition, int32_t epoch) = 0;
  // Appends `records` as one batch to `partition` as its leader in `epoch`.
  virtual io::Task<Appended> append(int32_t partition, int32_t epoch, std::vector<Record> records) = 0;
  // Returns once the records of `partition` below `end_offset` are
  // committed (kNone), or the error: NOT_COORDINATOR when leadership moved,
  // REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND.
  virtual io::Task<net::Error> wait_committed(int32_t partition, int32_t epoch, int64_t end_offset) = 0;
};

class BatchedWriter final : public RecordLog {
 public:
  struct Stats {
    int64_t writes = 0;   // writes asked for
    int64_t batches = 0;  // record batches appended for them
  };
  explicit BatchedWriter(BatchAppender& appender, size_t batch_bytes = size_t{1} << 20)
      : appender_(&appender), batch_bytes_(batch_bytes) {}
  BatchedWriter(const BatchedWriter&) = delete;
  BatchedWriter& operator=(const BatchedWriter&) = delete;

  io::Task<Written> write(int32_t partition, int32_t epoch, std::vector<Record> records) override;
  Stats stats() const { return stats_; }

 private:
  struct Write {
    int32_t epoch = -1;
    std::vector<Record> records;
    size_t count = 0;  // records
    size_t bytes = 0;
    bool done = false;
    net::Error error = net::Error::kNone;
    int64_t first_offset = -1;
    int64_t end_offset = -1;
  };
  struct Queue {
    std::vector<std::shared_ptr<Write>> waiting;
    std::vector<std::shared_ptr<Write>> in_flight;
    bool appending = false;
    io::WaitList finished;
  };
  io::Task<void> append_queued(int32_t partition, std::shared_ptr<Queue> queue);

  BatchAppender* appender_;
  size_t batch_bytes_;
  std::map<int32_t, std::shared_ptr<Queue>> queues_;
  Stats stats_;
};

}  // namespace brook::runtime
