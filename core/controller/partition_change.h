// core/controller/partition_change.h
//
// The leader and ISR rules of the controller (Kafka's PartitionChangeBuilder):
// given a partition's registration and the ISR the controller wants, the
// PartitionChangeRecord that gets it there, electing a leader when needed.
//
// Election. The current leader stays when it is still in the target ISR and
// still eligible (registered, unfenced, not in controlled shutdown) unless a
// preferred-leader election is asked for. Otherwise the first replica, in
// replica order, that is in the target ISR and eligible leads. When none is
// and unclean election is allowed, the first eligible replica outside the
// ISR leads alone (ISR = [leader], leader recovery state RECOVERING: it may
// lack acknowledged records). Otherwise there is no leader (-1).
//
// The ISR is never left empty: when the target ISR would be empty the last
// member stays in it (the replica most likely to hold every acknowledged
// record), with no leader, until it is eligible again and leads.
//
// Reassignment (KIP-455, as Kafka's builder). While a partition is being
// reassigned its replicas are the target's and the replicas leaving it
// (`removing_replicas`), and `adding_replicas` are the target's new ones.
// Any change completes the reassignment once every adding replica is in
// the ISR and the ISR keeps a member without the removing ones: the
// removing replicas leave the replicas and the ISR, both sets empty. A
// change that takes a replica out of the replicas bumps the leader epoch
// even when the leader stays, so the removed replica's fetches are fenced.
//
// A change that changes nothing gives no record. The record sets only what
// changes; replaying it bumps the partition epoch, and the leader epoch when
// the leader is set (core/metadata/image.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/metadata/image.h"
#include "net/kafka/messages/partition_change_record.h"
#include "net/kafka/wire.h"

namespace brook::controller {

enum class Election : uint8_t {
  kKeepCurrent,  // keep an eligible leader in the ISR; elect only when needed
  kPreferred,    // move leadership to the first eligible replica in the ISR
};

struct PartitionChangeRequest {
  net::Uuid topic_id;
  int32_t partition_id = 0;
  // The ISR wanted; nullopt keeps the current one.
  std::optional<std::vector<int32_t>> target_isr;
  Election election = Election::kKeepCurrent;
  bool unclean_allowed = false;
  // A reassignment's replicas, adding and removing replicas; nullopt keeps
  // the current ones.
  std::optional<std::vector<int32_t>> target_replicas;
  std::optional<std::vector<int32_t>> target_adding;
  std::optional<std::vector<int32_t>> target_removing;
};

// Whether a broker may lead or join the ISR.
using EligibleFn = std::function<bool(int32_t broker_id)>;

std::optional<net::PartitionChangeRecord> build_partition_change(
    const metadata::PartitionRegistration& current, const PartitionChangeRequest& request,
    const EligibleFn& eligible);

// The leader `change` gives `current` (its own leader when it sets none).
int32_t leader_after(const metadata::PartitionRegistration& current,
                     const net::PartitionChangeRecord& change);

}  // namespace brook::controller
