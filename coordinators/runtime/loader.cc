// coordinators/runtime/loader.cc
#include "coordinators/runtime/loader.h"

#include <fmt/format.h>

#include "net/kafka/record_batch.h"

namespace brook::runtime {

LeadershipChange sync_leadership(Coordinator& coordinator, const std::map<int32_t, int32_t>& led) {
  LeadershipChange out;
  for (const auto& [partition, epoch] : led) {
    if (coordinator.loaded_epoch(partition) == epoch) continue;
    coordinator.begin_load(partition, epoch);
    out.loads.push_back(partition);
  }
  for (int32_t partition : coordinator.loaded_partitions()) {
    if (!led.contains(partition)) out.unloaded.push_back(partition);
  }
  for (int32_t partition : out.unloaded) coordinator.unload(partition);
  return out;
}

namespace {

// A control batch: a commit or abort marker ends its producer's
// transaction; the others (leader changes) mean nothing to a coordinator.
absl::Status replay_control(Coordinator& coordinator, int32_t partition, const net::RecordBatchHeader& h,
                            const std::vector<net::Record>& records) {
  for (const net::Record& r : records) {
    if (!r.key.has_value()) return absl::DataLossError("a control record without a key");
    absl::StatusOr<net::ControlRecordKey> key = net::decode_control_record_key(r.key->span());
    if (!key.ok()) return key.status();
    if (key->type != net::ControlRecordType::kCommit && key->type != net::ControlRecordType::kAbort) continue;
    coordinator.replay_marker(partition, net::record_offset(h, r), h.producer_id,
                              key->type == net::ControlRecordType::kCommit);
  }
  return absl::OkStatus();
}

}  // namespace

io::Task<void> load_partition(Coordinator& coordinator, PartitionReader& reader, const io::Clock& clock,
                              io::Logger& log, std::string topic, int32_t partition, int32_t epoch,
                              LoadOptions options) {
  auto superseded = [&] { return coordinator.loaded_epoch(partition) != epoch || !coordinator.loading(partition); };
  auto give_up = [&](const std::string& why) {
    log.error("coordinator: loading {}-{} failed: {}", topic, partition, why);
    if (!superseded()) coordinator.unload(partition);
  };
  std::optional<std::pair<int64_t, int64_t>> bounds = reader.bounds(partition);
  if (!bounds.has_value()) co_return give_up("the partition is not on this broker");
  int64_t offset = bounds->first;
  int retries = 0;
  const int64_t end = bounds->second;
  size_t records = 0;
  while (offset < end) {
    if (superseded()) co_return;
    absl::StatusOr<PartitionReader::Chunk> read = co_await reader.read(partition, offset, options.read_bytes);
    if (!read.ok()) {
      if (++retries > options.read_retries) co_return give_up(read.status().ToString());
      log.warn("coordinator: loading {}-{}: {}; reading again", topic, partition, read.status().ToString());
      co_await clock.sleep_for(options.read_retry_backoff);
      continue;
    }
    if (read->out_of_range) {
      // Retention or DeleteRecords moved the start meanwhile.
      std::optional<std::pair<int64_t, int64_t>> now = reader.bounds(partition);
      if (now.has_value() && offset < now->first) {
        offset = now->first;
        continue;
      }
      co_return give_up(fmt::format("offset {} is out of range", offset));
    }
    if (read->records.empty()) {
      // Nothing below the end: truncated meanwhile, or a read the disk
      // garbled (the log could not find the batch). The state must not be
      // served without these records: read again for a while.
      std::optional<std::pair<int64_t, int64_t>> now = reader.bounds(partition);
      if (!now.has_value()) co_return give_up("the partition left this broker");
      if (offset >= now->second) break;
      if (++retries > options.read_retries) {
        co_return give_up(fmt::format("offset {} of [{}, {}) cannot be read", offset, now->first, now->second));
      }
      log.warn("coordinator: loading {}-{}: nothing read at offset {} of [{}, {}); reading again", topic, partition,
               offset, now->first, now->second);
      co_await clock.sleep_for(options.read_retry_backoff);
      continue;
    }
    if (superseded()) co_return;
    net::BatchIterator it(std::move(read->records));
    while (true) {
      absl::StatusOr<std::optional<net::BatchView>> next = it.next();
      if (!next.ok()) co_return give_up(next.status().ToString());
      if (!next->has_value()) break;
      const net::RecordBatchHeader& h = (*next)->header;
      offset = h.base_offset + h.last_offset_delta + 1;
      absl::StatusOr<std::vector<net::Record>> decoded = net::decode_records((*next)->bytes, options.max_batch_bytes);
      if (!decoded.ok()) co_return give_up(decoded.status().ToString());
      if (h.is_control()) {
        absl::Status s = replay_control(coordinator, partition, h, *decoded);
        if (!s.ok()) co_return give_up(s.ToString());
        continue;
      }
      for (const net::Record& r : *decoded) {
        const int64_t at = net::record_offset(h, r);
        absl::Status s = h.is_transactional()
                             ? coordinator.replay_transactional(partition, at, h.producer_id, r.key, r.value)
                             : coordinator.replay(partition, at, r.key, r.value);
        if (!s.ok()) co_return give_up(s.ToString());
        ++records;
      }
    }
  }
  // Serve nothing that is not committed (load_partition in loader.h).
  bool waited = false;
  while (true) {
    if (superseded()) co_return;
    const net::Error committed = co_await reader.wait_committed(partition, epoch, offset);
    if (committed == net::Error::kNone || committed == net::Error::kNotEnoughReplicasAfterAppend) break;
    // Led no longer: the next leadership sync unloads the shard.
    if (committed == net::Error::kNotCoordinator) co_return;
    if (!waited) {
      log.info("coordinator: {}-{} waits for its high watermark to reach offset {}", topic, partition, offset);
      waited = true;
    }
  }
  if (superseded()) co_return;
  coordinator.finish_load(partition, epoch);
  log.info("coordinator: {}-{} loaded {} records up to offset {} in epoch {}", topic, partition, records, offset,
           epoch);
}

}  // namespace brook::runtime
