// coordinators/runtime/shards.cc
#include "coordinators/runtime/shards.h"

namespace brook::runtime {

void ShardTable::begin_load(int32_t partition, int32_t epoch) { shards_[partition] = Shard{epoch, true}; }

bool ShardTable::finish_load(int32_t partition, int32_t epoch) {
  auto it = shards_.find(partition);
  if (it == shards_.end() || it->second.epoch != epoch || !it->second.loading) return false;
  it->second.loading = false;
  return true;
}

bool ShardTable::unload(int32_t partition) { return shards_.erase(partition) > 0; }

std::optional<int32_t> ShardTable::epoch(int32_t partition) const {
  auto it = shards_.find(partition);
  if (it == shards_.end()) return std::nullopt;
  return it->second.epoch;
}

bool ShardTable::loading(int32_t partition) const {
  auto it = shards_.find(partition);
  return it != shards_.end() && it->second.loading;
}

bool ShardTable::serving(int32_t partition, int32_t epoch) const {
  auto it = shards_.find(partition);
  return it != shards_.end() && !it->second.loading && it->second.epoch == epoch;
}

std::vector<int32_t> ShardTable::partitions() const {
  std::vector<int32_t> out;
  out.reserve(shards_.size());
  for (const auto& [p, shard] : shards_) out.push_back(p);
  return out;
}

net::Error ShardTable::check(int32_t partition) const {
  auto it = shards_.find(partition);
  if (it == shards_.end()) return net::Error::kNotCoordinator;
  if (it->second.loading) return net::Error::kCoordinatorLoadInProgress;
  return net::Error::kNone;
}

io::Mutex& ShardTable::lock(int32_t partition) {
  std::unique_ptr<io::Mutex>& m = locks_[partition];
  if (m == nullptr) m = std::make_unique<io::Mutex>();
  return *m;
}

}  // namespace brook::runtime
