// core/placement/placement.cc
//
// The striped placer of placement.h. Validation comes first and draws
// nothing; a RackList then holds the racks, their broker lists and the
// offsets that move from one partition to the next.
#include "core/placement/placement.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "io/assert.h"

namespace brook::placement {
namespace {

// Brokers handed out round-robin. Each round (one partition) takes them at
// most once each, starting one position further on than the last round that
// used the list.
class BrokerList {
 public:
  void add(int32_t id) { ids_.push_back(id); }

  void initialize(io::Random& random) {
    if (ids_.empty()) return;
    std::sort(ids_.begin(), ids_.end());
    offset_ = random.uniform(ids_.size());
  }

  // Keeps the offset: only which broker sits at each position changes.
  void shuffle_ids(io::Random& random) { random.shuffle(ids_); }

  // The next broker of `round`, or nullopt once all were taken in it.
  // REQUIRES: round never decreases between calls.
  std::optional<int32_t> next(uint64_t round) {
    if (ids_.empty()) return std::nullopt;
    if (round != round_) {
      BROOK_ASSERT_GT(round, round_);
      round_ = round;
      taken_ = 0;
      offset_ = (offset_ + 1) % ids_.size();
    }
    if (taken_ == ids_.size()) return std::nullopt;
    const int32_t id = ids_[(offset_ + taken_) % ids_.size()];
    ++taken_;
    return id;
  }

 private:
  std::vector<int32_t> ids_;
  size_t offset_ = 0;
  size_t taken_ = 0;
  uint64_t round_ = 0;
};

struct Rack {
  BrokerList unfenced;
  BrokerList fenced;

  // Unfenced brokers first: a fenced one only when the rack has no unused
  // unfenced broker left in this round.
  std::optional<int32_t> next(uint64_t round) {
    if (auto id = unfenced.next(round)) return id;
    return fenced.next(round);
  }
};

// Orders rack names as Kafka's OptionalStringComparator: no rack first, then
// by name. (std::optional's own operator< orders them the same way; this
// says so where it matters.)
struct RackLess {
  bool operator()(const std::optional<std::string>& a, const std::optional<std::string>& b) const {
    if (!a.has_value() || !b.has_value()) return !a.has_value() && b.has_value();
    return *a < *b;
  }
};

class RackList {
 public:
  // REQUIRES: at least one unfenced broker; distinct broker ids.
  RackList(std::span<const UsableBroker> brokers, io::Random& random) : random_(random) {
    std::map<std::optional<std::string>, Rack, RackLess> by_name;
    for (const UsableBroker& broker : brokers) {
      Rack& rack = by_name[broker.rack];
      if (broker.fenced) {
        rack.fenced.add(broker.id);
      } else {
        rack.unfenced.add(broker.id);
        ++unfenced_count_;
      }
    }
    BROOK_ASSERT_GT(unfenced_count_, 0u);
    for (auto& entry : by_name) {
      Rack& rack = entry.second;
      rack.fenced.initialize(random_);
      rack.unfenced.initialize(random_);
      order_.push_back(racks_.size());
      racks_.push_back(std::move(rack));
    }
    offset_ = random_.uniform(racks_.size());
  }

  // The replicas of the next partition, leader first.
  std::vector<int32_t> place(size_t replication_factor) {
    if (rounds_since_shuffle_ == unfenced_count_ && unfenced_count_ > 1) {
      shuffle_all();
      rounds_since_shuffle_ = 0;
    }
    if (offset_ == racks_.size()) offset_ = 0;
    std::vector<int32_t> replicas;
    replicas.reserve(replication_factor);
    const size_t leader_position = place_leader(replicas);
    place_followers(leader_position, replication_factor, replicas);
    ++round_;
    ++offset_;
    ++rounds_since_shuffle_;
    return replicas;
  }

 private:
  Rack& rack_at(size_t position) { return racks_[order_[position]]; }

  // Takes the leader from the first rack, from offset_ on, with an unfenced
  // broker; returns that rack's position in order_.
  size_t place_leader(std::vector<int32_t>& replicas) {
    size_t position = offset_;
    for (size_t visited = 0; visited < racks_.size(); ++visited) {
      if (auto id = rack_at(position).unfenced.next(round_)) {
        replicas.push_back(*id);
        return position;
      }
      position = (position + 1) % racks_.size();
    }
    BROOK_UNREACHABLE();  // a fresh round always finds the unfenced broker
  }

  // Walks the racks from offset_, one broker per rack per pass, skipping the
  // leader's rack on the first pass, until there are replication_factor.
  void place_followers(size_t leader_position, size_t replication_factor,
                       std::vector<int32_t>& replicas) {
    size_t position = offset_;
    bool leader_rack_skipped = false;
    // Each pass over the racks adds a broker while any is unused.
    const size_t steps_max = racks_.size() * (replication_factor + 1);
    for (size_t step = 0; replicas.size() < replication_factor; ++step) {
      BROOK_ASSERT_LT(step, steps_max);
      if (position == leader_position && !leader_rack_skipped) {
        leader_rack_skipped = true;
      } else if (auto id = rack_at(position).next(round_)) {
        replicas.push_back(*id);
      }
      position = (position + 1) % racks_.size();
    }
  }

  void shuffle_all() {
    random_.shuffle(order_);
    for (Rack& rack : racks_) {
      rack.fenced.shuffle_ids(random_);
      rack.unfenced.shuffle_ids(random_);
    }
  }

  io::Random& random_;
  std::vector<Rack> racks_;    // sorted by name
  std::vector<size_t> order_;  // the order racks are visited in, as indices into racks_
  size_t offset_ = 0;          // the position in order_ where the next partition starts
  size_t unfenced_count_ = 0;
  size_t rounds_since_shuffle_ = 0;
  uint64_t round_ = 0;  // the partitions placed so far; never reset
};

PlacementError error(net::Error code, std::string message) {
  return PlacementError{.error = code, .message = std::move(message)};
}

std::optional<PlacementError> validate(const PlacementSpec& spec,
                                       std::span<const UsableBroker> brokers) {
  const int32_t rf = spec.replication_factor;
  if (rf <= 0) {
    return error(net::Error::kInvalidReplicationFactor,
                 fmt::format("Invalid replication factor {}: the replication factor must be "
                             "positive.",
                             rf));
  }
  if (spec.num_partitions <= 0) {
    return error(net::Error::kInvalidPartitions,
                 "Number of partitions was set to an invalid non-positive value.");
  }
  constexpr int32_t kPartitionIdMax = std::numeric_limits<int32_t>::max();
  if (spec.start_partition < 0 ||
      spec.num_partitions - 1 > kPartitionIdMax - spec.start_partition) {
    return error(net::Error::kInvalidPartitions,
                 fmt::format("Invalid partition ids: {} partition(s) starting at partition {} "
                             "do not fit in 0..{}.",
                             spec.num_partitions, spec.start_partition, kPartitionIdMax));
  }
  const bool any_unfenced =
      std::any_of(brokers.begin(), brokers.end(), [](const UsableBroker& b) { return !b.fenced; });
  if (!any_unfenced) {
    return error(net::Error::kInvalidReplicationFactor, "All brokers are currently fenced.");
  }
  if (static_cast<size_t>(rf) > brokers.size()) {
    return error(net::Error::kInvalidReplicationFactor,
                 fmt::format("The target replication factor of {} cannot be reached because "
                             "only {} broker(s) are registered.",
                             rf, brokers.size()));
  }
  return std::nullopt;
}

void assert_distinct_ids(std::span<const UsableBroker> brokers) {
  std::vector<int32_t> ids;
  ids.reserve(brokers.size());
  for (const UsableBroker& broker : brokers) ids.push_back(broker.id);
  std::sort(ids.begin(), ids.end());
  const auto duplicate = std::adjacent_find(ids.begin(), ids.end());
  BROOK_ASSERT_MSG(duplicate == ids.end(), "broker {} is listed twice", *duplicate);
}

}  // namespace

PlacementResult place(const PlacementSpec& spec, std::span<const UsableBroker> brokers,
                      io::Random& random) {
  assert_distinct_ids(brokers);
  if (auto failure = validate(spec, brokers)) return std::move(*failure);
  const auto rf = static_cast<size_t>(spec.replication_factor);
  RackList racks(brokers, random);
  Assignment assignment;
  assignment.reserve(static_cast<size_t>(spec.num_partitions));
  for (int32_t i = 0; i < spec.num_partitions; ++i) {
    assignment.push_back(racks.place(rf));
    BROOK_ASSERT_EQ(assignment.back().size(), rf);
  }
  return assignment;
}

}  // namespace brook::placement
