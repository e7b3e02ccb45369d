// coordinators/group/assignors.cc
#include "coordinators/group/assignors.h"

#include <algorithm>
#include <utility>

namespace brook::group {
namespace {

// The members ordered by id, and what each may keep of its current
// assignment: partitions of subscribed, existing topics within their
// partition count, each claimed by the first member (by id) holding it.
struct Prepared {
  std::vector<const AssignorMember*> members;
  std::vector<TopicPartitions> kept;
  // Topic -> indexes (into members) of its subscribers, in member order.
  std::map<TopicId, std::vector<size_t>, TopicIdLess> subscribers;
};

Prepared prepare(const std::vector<AssignorMember>& members, const TopicPartitionCounts& topics) {
  Prepared p;
  for (const AssignorMember& m : members) p.members.push_back(&m);
  std::sort(p.members.begin(), p.members.end(),
            [](const AssignorMember* a, const AssignorMember* b) { return a->member_id < b->member_id; });
  // A repeated member id counts once.
  p.members.erase(std::unique(p.members.begin(), p.members.end(),
                              [](const AssignorMember* a, const AssignorMember* b) {
                                return a->member_id == b->member_id;
                              }),
                  p.members.end());
  p.kept.resize(p.members.size());
  std::map<TopicId, std::vector<bool>, TopicIdLess> claimed;
  for (const auto& [topic, count] : topics) claimed[topic].assign(static_cast<size_t>(std::max(count, 0)), false);
  for (size_t i = 0; i < p.members.size(); ++i) {
    const AssignorMember& m = *p.members[i];
    for (const TopicId& topic : m.subscribed_topics) {
      if (topics.contains(topic)) p.subscribers[topic].push_back(i);
    }
    for (const auto& [topic, partitions] : m.current) {
      auto c = claimed.find(topic);
      if (c == claimed.end() || !m.subscribed_topics.contains(topic)) continue;
      for (int32_t partition : partitions) {
        if (partition < 0 || static_cast<size_t>(partition) >= c->second.size() || c->second[partition]) continue;
        c->second[partition] = true;
        p.kept[i][topic].insert(partition);
      }
    }
  }
  return p;
}

GroupAssignment result_of(const Prepared& p, std::vector<TopicPartitions> assignment) {
  GroupAssignment out;
  for (size_t i = 0; i < p.members.size(); ++i) {
    TopicPartitions& a = assignment[i];
    std::erase_if(a, [](const auto& entry) { return entry.second.empty(); });
    out.emplace(p.members[i]->member_id, std::move(a));
  }
  return out;
}

size_t total(const TopicPartitions& a) {
  size_t n = 0;
  for (const auto& [topic, partitions] : a) n += partitions.size();
  return n;
}

}  // namespace

GroupAssignment assign_uniform(const std::vector<AssignorMember>& members, const TopicPartitionCounts& topics) {
  Prepared p = prepare(members, topics);
  const size_t n = p.members.size();
  if (n == 0) return {};
  std::vector<TopicPartitions> assignment = std::move(p.kept);
  std::vector<size_t> count(n);
  for (size_t i = 0; i < n; ++i) count[i] = total(assignment[i]);

  // Every member subscribed to the same existing topics: each member's
  // share is floor(P/n) or one more, the larger shares going to the members
  // that hold the most (so that the fewest partitions move); a member gives
  // up what it holds beyond its share.
  bool homogeneous = true;
  for (const auto& [topic, subs] : p.subscribers) homogeneous = homogeneous && subs.size() == n;
  if (homogeneous) {
    size_t partitions = 0;
    for (const auto& [topic, subs] : p.subscribers) partitions += static_cast<size_t>(topics.at(topic));
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return count[a] > count[b]; });
    for (size_t k = 0; k < n; ++k) {
      const size_t i = order[k];
      size_t quota = partitions / n + (k < partitions % n ? 1 : 0);
      for (auto& [topic, held] : assignment[i]) {
        while (held.size() > quota) held.erase(std::prev(held.end()));
        quota -= held.size();
      }
      count[i] = total(assignment[i]);
    }
  }

  // What nobody keeps goes, topic by topic (those with the fewest
  // subscribers first, where the choice is narrowest), to the subscriber
  // holding the fewest partitions.
  std::vector<std::pair<size_t, TopicId>> topic_order;
  for (const auto& [topic, subs] : p.subscribers) topic_order.emplace_back(subs.size(), topic);
  std::stable_sort(topic_order.begin(), topic_order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [unused, topic] : topic_order) {
    const std::vector<size_t>& subs = p.subscribers.at(topic);
    std::vector<bool> taken(static_cast<size_t>(topics.at(topic)), false);
    for (size_t i : subs) {
      auto held = assignment[i].find(topic);
      if (held == assignment[i].end()) continue;
      for (int32_t partition : held->second) taken[partition] = true;
    }
    std::set<std::pair<size_t, size_t>> least;  // (count, member index)
    for (size_t i : subs) least.emplace(count[i], i);
    for (size_t partition = 0; partition < taken.size(); ++partition) {
      if (taken[partition]) continue;
      auto [c, i] = *least.begin();
      least.erase(least.begin());
      assignment[i][topic].insert(static_cast<int32_t>(partition));
      count[i] = c + 1;
      least.emplace(count[i], i);
    }
  }

  // Different subscriptions: kept partitions can leave one member far ahead
  // of another that could take them. Move a partition from the fullest
  // holder of a topic to its emptiest subscriber while they differ by more
  // than one; each move lowers the sum of squared counts, so this ends.
  if (!homogeneous) {
    for (bool moved = true; moved;) {
      moved = false;
      for (const auto& [topic_id, subs] : p.subscribers) {
        const TopicId& topic = topic_id;
        while (true) {
          std::optional<size_t> fullest;
          size_t emptiest = subs.front();
          for (size_t i : subs) {
            if (count[i] < count[emptiest]) emptiest = i;
            auto held = assignment[i].find(topic);
            if (held != assignment[i].end() && !held->second.empty() && (!fullest || count[i] > count[*fullest])) {
              fullest = i;
            }
          }
          if (!fullest || count[*fullest] <= count[emptiest] + 1) break;
          std::set<int32_t>& from = assignment[*fullest][topic];
          const int32_t partition = *std::prev(from.end());
          from.erase(std::prev(from.end()));
          assignment[emptiest][topic].insert(partition);
          --count[*fullest];
          ++count[emptiest];
          moved = true;
        }
      }
    }
  }
  return result_of(p, std::move(assignment));
}

GroupAssignment assign_range(const std::vector<AssignorMember>& members, const TopicPartitionCounts& topics) {
  Prepared p = prepare(members, topics);
  std::vector<TopicPartitions> assignment(p.members.size());
  for (const auto& [topic, subs] : p.subscribers) {
    const size_t partitions = static_cast<size_t>(topics.at(topic));
    const size_t share = partitions / subs.size();
    size_t extras = partitions % subs.size();
    std::vector<bool> taken(partitions, false);
    // Each member keeps up to its share of the lowest partitions it holds,
    // one more if it holds more and an extra partition is still to give.
    std::vector<std::pair<size_t, size_t>> wanting;  // (member index, partitions still due)
    for (size_t i : subs) {
      std::vector<int32_t> held;
      if (auto h = p.kept[i].find(topic); h != p.kept[i].end()) held.assign(h->second.begin(), h->second.end());
      size_t keep = std::min(held.size(), share);
      if (held.size() > share && extras > 0) {
        --extras;
        ++keep;
      } else {
        wanting.emplace_back(i, share - keep);
      }
      for (size_t k = 0; k < keep; ++k) {
        assignment[i][topic].insert(held[k]);
        taken[held[k]] = true;
      }
    }
    // The rest in ascending ranges, the extra partitions to the first.
    size_t next = 0;
    for (auto [i, due] : wanting) {
      if (extras > 0) {
        --extras;
        ++due;
      }
      for (; due > 0; --due) {
        while (taken[next]) ++next;
        assignment[i][topic].insert(static_cast<int32_t>(next));
        taken[next] = true;
      }
    }
  }
  return result_of(p, std::move(assignment));
}

std::optional<Assignor> find_assignor(std::string_view name) {
  if (name == "uniform") return &assign_uniform;
  if (name == "range") return &assign_range;
  return std::nullopt;
}

}  // namespace brook::group
