// core/controller/partition_change.cc
#include "core/controller/partition_change.h"

#include <algorithm>

namespace brook::controller {

namespace {

bool contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

std::optional<net::PartitionChangeRecord> build_partition_change(
    const metadata::PartitionRegistration& current, const PartitionChangeRequest& request,
    const EligibleFn& eligible) {
  std::vector<int32_t> replicas = request.target_replicas.value_or(current.replicas);
  std::vector<int32_t> adding = request.target_adding.value_or(current.adding_replicas);
  std::vector<int32_t> removing = request.target_removing.value_or(current.removing_replicas);
  std::vector<int32_t> isr = request.target_isr.value_or(current.isr);
  if (!adding.empty() || !removing.empty()) {
    std::vector<int32_t> kept;
    for (int32_t r : isr) {
      if (!contains(removing, r)) kept.push_back(r);
    }
    const bool all_added = std::all_of(adding.begin(), adding.end(), [&](int32_t r) { return contains(kept, r); });
    if (!kept.empty() && all_added) {
      std::erase_if(replicas, [&](int32_t r) { return contains(removing, r); });
      isr = std::move(kept);
      adding.clear();
      removing.clear();
    }
  }
  if (isr.empty() && !current.isr.empty()) {
    // Keep the last member still a replica: the current leader if it was
    // in the ISR, else the last such ISR member.
    int32_t keep = metadata::kNoLeader;
    if (current.leader >= 0 && contains(current.isr, current.leader) && contains(replicas, current.leader)) {
      keep = current.leader;
    } else {
      for (auto it = current.isr.rbegin(); it != current.isr.rend() && keep == metadata::kNoLeader; ++it) {
        if (contains(replicas, *it)) keep = *it;
      }
    }
    if (keep != metadata::kNoLeader) isr = {keep};
  }
  int32_t leader = metadata::kNoLeader;
  int8_t recovery = current.leader_recovery_state;
  const bool keep_current = request.election == Election::kKeepCurrent && current.leader >= 0 &&
                            contains(isr, current.leader) && contains(replicas, current.leader) &&
                            eligible(current.leader);
  if (keep_current) {
    leader = current.leader;
  } else {
    for (int32_t replica : replicas) {
      if (contains(isr, replica) && eligible(replica)) {
        leader = replica;
        break;
      }
    }
    if (leader == metadata::kNoLeader && request.unclean_allowed) {
      for (int32_t replica : replicas) {
        if (eligible(replica)) {
          leader = replica;
          isr = {replica};
          recovery = 1;  // RECOVERING
          break;
        }
      }
    }
  }
  net::PartitionChangeRecord record;
  record.topic_id = request.topic_id;
  record.partition_id = request.partition_id;
  bool changed = false;
  auto set = [&](std::optional<std::vector<int32_t>>& field, const std::vector<int32_t>& want,
                 const std::vector<int32_t>& was) {
    if (want == was) return;
    field = want;
    changed = true;
  };
  set(record.replicas, replicas, current.replicas);
  set(record.adding_replicas, adding, current.adding_replicas);
  set(record.removing_replicas, removing, current.removing_replicas);
  set(record.isr, isr, current.isr);
  const bool replica_removed = std::any_of(current.replicas.begin(), current.replicas.end(),
                                           [&](int32_t r) { return !contains(replicas, r); });
  if (leader != current.leader || replica_removed) {
    record.leader = leader;  // (the same leader: a new leader epoch)
    changed = true;
  }
  if (recovery != current.leader_recovery_state) {
    record.leader_recovery_state = recovery;
    changed = true;
  }
  if (!changed) return std::nullopt;
  return record;
}

int32_t leader_after(const metadata::PartitionRegistration& current,
                     const net::PartitionChangeRecord& change) {
  return change.leader == metadata::kNoLeaderChange ? current.leader : change.leader;
}

}  // namespace brook::controller
