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
  std::vector<int32_t> isr = request.target_isr.value_or(current.isr);
  if (isr.empty() && !current.isr.empty()) {
    // Keep the last member: the current leader if it was in the ISR, else
    // the last ISR member in replica order.
    int32_t keep = current.isr.back();
    if (current.leader >= 0 && contains(current.isr, current.leader)) keep = current.leader;
    isr = {keep};
  }
  int32_t leader = metadata::kNoLeader;
  int8_t recovery = current.leader_recovery_state;
  const bool keep_current = request.election == Election::kKeepCurrent && current.leader >= 0 &&
                            contains(isr, current.leader) && eligible(current.leader);
  if (keep_current) {
    leader = current.leader;
  } else {
    for (int32_t replica : current.replicas) {
      if (contains(isr, replica) && eligible(replica)) {
        leader = replica;
        break;
      }
    }
    if (leader == metadata::kNoLeader && request.unclean_allowed) {
      for (int32_t replica : current.replicas) {
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
  if (isr != current.isr) {
    record.isr = isr;
    changed = true;
  }
  if (leader != current.leader) {
    record.leader = leader;
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
