// coordinators/runtime/shards.h
//
// ShardTable: which partitions of a coordinator's internal topic this
// broker serves. A partition is a shard of the coordinator's state; it is
// served only while this broker leads it: begin_load() when it becomes
// leader (its state is then replayed from the log), finish_load() when the
// replay is done, unload() when leadership moves away. Requests for a key
// of a partition not served here answer NOT_COORDINATOR, and during the
// load COORDINATOR_LOAD_IN_PROGRESS, which clients retry after finding the
// coordinator again.
//
// Writes of one shard that must not interleave (a read-modify-write of a
// key's state spanning a log write) take the shard's lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "io/sync.h"
#include "net/kafka/errors.h"

namespace brook::runtime {

class ShardTable {
 public:
  // `partition` is led here in `epoch` and being loaded (a newer epoch
  // replaces an older load).
  void begin_load(int32_t partition, int32_t epoch);
  // The load of `partition` in `epoch` is done; false (nothing changes) if
  // a newer begin_load or an unload came meanwhile.
  bool finish_load(int32_t partition, int32_t epoch);
  // `partition` is no longer led here; false if it was not served.
  bool unload(int32_t partition);

  // The epoch `partition` is served (or being loaded) in, if any.
  std::optional<int32_t> epoch(int32_t partition) const;
  bool loading(int32_t partition) const;
  // Served (loaded) in exactly `epoch`.
  bool serving(int32_t partition, int32_t epoch) const;
  // The partitions served or being loaded, in order.
  std::vector<int32_t> partitions() const;
  // kNone when `partition` is served here; else NOT_COORDINATOR or
  // COORDINATOR_LOAD_IN_PROGRESS.
  net::Error check(int32_t partition) const;

  // The lock that serializes `partition`'s dependent writes.
  io::Mutex& lock(int32_t partition);

 private:
  struct Shard {
    int32_t epoch = -1;
    bool loading = true;
  };
  std::map<int32_t, Shard> shards_;
  std::map<int32_t, std::unique_ptr<io::Mutex>> locks_;
};

}  // namespace brook::runtime
