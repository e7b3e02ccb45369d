// core/placement/placement.h
//
// Replica placement: which brokers hold the replicas of the partitions a
// CreateTopics or CreatePartitions request adds, and which replica leads
// (the first, the preferred leader). This is the controller's placer, Kafka's
// StripedReplicaPlacer, with its constraints, goals and striping; only the
// random stream differs (io::Random, not java.util.Random), so for a given
// cluster the chosen brokers differ from Kafka's but follow the same rules.
// A pure function: no state survives a call but what it draws from `random`.
//
// Constraints; placement fails when they cannot both hold:
//   * no partition has two replicas on one broker (so RF <= registered
//     brokers, fenced ones included);
//   * the first replica is an unfenced broker.
//
// Goals, from the highest priority down (Kafka's order):
//   1. Racks. Brokers with no rack form one rack of their own. A partition's
//      replicas go round-robin over the racks, so with RF <= R racks each
//      replica is on its own rack, and with more a rack gets its (k+1)-th
//      replica only once every rack with an unused broker holds k: per-rack
//      counts differ by at most one except where a rack has run out.
//   2. Brokers. Each partition starts one rack further on, and each rack
//      hands out its brokers from one step further on each partition that
//      uses it (the "stripes"). On one rack (or none) the leaders rotate over
//      the u unfenced brokers: partitions [k*u, (k+1)*u) of one call have u
//      distinct leaders. With several racks, each having an unfenced broker,
//      the leading rack rotates; but Kafka's striping does not balance the
//      leaders among a rack's brokers: with 3 racks of 3 brokers and RF 3,
//      the first 9 partitions get their leaders from only 3 brokers.
//   3. Unfenced brokers. A rack hands out its unfenced brokers before its
//      fenced ones. As in Kafka this yields to the rack goal: a partition
//      takes a fenced broker of rack X only once it holds every unfenced
//      broker of X, even if another rack still has an unused unfenced broker
//      (racks {a1, a2} and {b1 fenced}, RF 2, always give [a, b1]). With one
//      rack, a fenced broker is used only when fewer than RF are unfenced.
//
// Algorithm. Racks are sorted by name (no rack first), and each rack's
// unfenced and fenced brokers by id; each such list and the rack order get a
// random starting offset. A partition takes its leader from the first rack,
// from the current offset on, with an unused unfenced broker, then walks the
// racks again from the offset (skipping the leader's rack once) taking one
// broker per rack until it has RF. The offsets then advance by one. After as
// many partitions as there are unfenced brokers, the rack order and every
// broker list are shuffled so the cycle does not repeat. Unlike Kafka, a list
// never carries its position over from before a shuffle (Kafka reuses
// iteration epoch 0 after one, which can leave a list marked as used).
//
// Errors. A failure is a PlacementError, the Kafka error code and message
// a CreateTopics or CreatePartitions response carries; Kafka's controller
// prefixes the message with "Unable to replicate the partition N time(s): "
// for INVALID_REPLICATION_FACTOR. Checked in this order:
//   INVALID_REPLICATION_FACTOR  RF <= 0:
//       "Invalid replication factor N: the replication factor must be positive."
//   INVALID_PARTITIONS          num_partitions <= 0:
//       "Number of partitions was set to an invalid non-positive value."
//   INVALID_PARTITIONS          start_partition < 0, or a partition id past
//                               INT32_MAX (Brook's check; Kafka has none)
//   INVALID_REPLICATION_FACTOR  no unfenced broker (or no broker at all):
//       "All brokers are currently fenced."
//   INVALID_REPLICATION_FACTOR  RF > registered brokers:
//       "The target replication factor of N cannot be reached because only
//        M broker(s) are registered."
//
// Determinism. The result is a function of the spec, the set of brokers
// (their order in the span does not matter) and the state of `random`;
// nothing else is random and no container is iterated in hash order.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "io/random.h"
#include "net/kafka/errors.h"

namespace brook::placement {

// A registered broker that may hold new replicas (Kafka's UsableBroker: the
// controller leaves out brokers in controlled shutdown).
struct UsableBroker {
  int32_t id = 0;
  std::optional<std::string> rack;
  bool fenced = false;
};

struct PlacementSpec {
  // The id of the first new partition (the topic's partition count before a
  // CreatePartitions; 0 for a new topic). Replica list i is for partition
  // start_partition + i. It does not change the placement, as in Kafka.
  int32_t start_partition = 0;
  int32_t num_partitions = 0;
  int16_t replication_factor = 0;
};

// Why placement failed: the Kafka error (kInvalidReplicationFactor or
// kInvalidPartitions) and Kafka's message for it.
struct PlacementError {
  net::Error error = net::Error::kNone;
  std::string message;
};

// One replica list per partition, leader (preferred replica) first; each
// list holds replication_factor distinct broker ids.
using Assignment = std::vector<std::vector<int32_t>>;

// The outcome of place(): an Assignment or a PlacementError.
//   auto result = placement::place(spec, brokers, random);
//   if (auto* error = std::get_if<placement::PlacementError>(&result)) ...
using PlacementResult = std::variant<Assignment, PlacementError>;

// Places spec.num_partitions partitions of spec.replication_factor replicas
// on `brokers`, drawing from `random` (a failed call draws nothing).
// The output holds num_partitions * replication_factor ids: the caller bounds
// num_partitions (the controller's per-request limits).
// REQUIRES: broker ids are distinct.
PlacementResult place(const PlacementSpec& spec, std::span<const UsableBroker> brokers,
                      io::Random& random);

}  // namespace brook::placement
