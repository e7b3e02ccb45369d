// core/broker/fetch_session.cc
#include "core/broker/fetch_session.h"

#include <algorithm>
#include <climits>
#include <utility>

namespace brook::broker {

namespace {

bool same_topic(bool by_id, const FetchSessionPartition& sp, const std::string& topic, const net::Uuid& id) {
  return by_id ? sp.topic_id == id : sp.topic == topic;
}

// Nothing to tell: no records, no error, no divergence, and the offsets the
// last answer gave.
bool unchanged(const FetchSessionPartition& sp, const net::FetchResponse::PartitionData& out) {
  return out.error_code == 0 && (!out.records.has_value() || out.records->size() == 0) &&
         out.diverging_epoch.epoch < 0 && out.high_watermark == sp.high_watermark &&
         out.last_stable_offset == sp.last_stable_offset && out.log_start_offset == sp.log_start_offset;
}

// Calls fn(session partition or nullptr, answer partition) for each answer
// partition: the answer follows the order begin() gave the request, so
// the i-th answer partition is the session's i-th (checked: nullptr when
// the session changed under a waiting request).
template <typename Session, typename Response, typename Fn>
void walk(bool by_id, Session& s, Response& response, Fn fn) {
  size_t i = 0;
  for (auto& t : response.responses) {
    for (auto& out : t.partitions) {
      auto* sp = i < s.partitions.size() ? &s.partitions[i] : nullptr;
      if (sp != nullptr && (sp->fetch.partition != out.partition_index || !same_topic(by_id, *sp, t.topic, t.topic_id))) {
        sp = nullptr;
      }
      fn(sp, t, out);
      ++i;
    }
  }
}

}  // namespace

FetchSession& FetchSessionCache::create(bool by_id, io::Instant now, io::Random& random) {
  if (sessions_.size() >= slots_ && !sessions_.empty()) {
    auto oldest = sessions_.begin();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    }
    sessions_.erase(oldest);
  }
  int32_t id = 0;
  while (id == 0 || sessions_.contains(id)) {
    id = static_cast<int32_t>(random.uniform(static_cast<uint64_t>(INT32_MAX))) + 1;
  }
  FetchSession& s = sessions_[id];
  s.id = id;
  s.by_id = by_id;
  s.last_used = now;
  return s;
}

const FetchSession* FetchSessionCache::find(int32_t id) const {
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : &it->second;
}

net::Error FetchSessionCache::begin(net::FetchRequest* request, int16_t version, io::Instant now, io::Random& random,
                                    Use* use) {
  *use = Use{};
  const bool by_id = version >= 13;
  if (version < 7) return net::Error::kNone;
  if (request->session_epoch < 0) {
    if (request->session_id != 0) sessions_.erase(request->session_id);
    return net::Error::kNone;
  }
  FetchSession* session = nullptr;
  if (request->session_epoch == 0) {
    if (request->session_id != 0) sessions_.erase(request->session_id);
    session = &create(by_id, now, random);
  } else {
    auto it = sessions_.find(request->session_id);
    if (it == sessions_.end()) return net::Error::kFetchSessionIdNotFound;
    if (it->second.epoch != request->session_epoch) return net::Error::kInvalidFetchSessionEpoch;
    if (it->second.by_id != by_id) return net::Error::kFetchSessionTopicIdError;
    session = &it->second;
    use->incremental = true;
  }
  use->id = session->id;
  if (!use->incremental) session->partitions.clear();
  // Partitions added or changed, then those forgotten.
  for (const auto& t : request->topics) {
    for (const auto& part : t.partitions) {
      auto it = std::find_if(session->partitions.begin(), session->partitions.end(), [&](const FetchSessionPartition& sp) {
        return sp.fetch.partition == part.partition && same_topic(by_id, sp, t.topic, t.topic_id);
      });
      if (it == session->partitions.end()) {
        FetchSessionPartition sp;
        sp.topic = t.topic;
        sp.topic_id = t.topic_id;
        sp.fetch = part;
        session->partitions.push_back(std::move(sp));
      } else {
        it->fetch = part;
      }
    }
  }
  for (const auto& f : request->forgotten_topics_data) {
    std::erase_if(session->partitions, [&](const FetchSessionPartition& sp) {
      return same_topic(by_id, sp, f.topic, f.topic_id) &&
             std::find(f.partitions.begin(), f.partitions.end(), sp.fetch.partition) != f.partitions.end();
    });
  }
  // The request now fetches the whole session, topic by topic in the
  // session's order.
  request->topics.clear();
  for (const FetchSessionPartition& sp : session->partitions) {
    if (request->topics.empty() || !same_topic(by_id, sp, request->topics.back().topic, request->topics.back().topic_id)) {
      auto& t = request->topics.emplace_back();
      t.topic = sp.topic;
      t.topic_id = sp.topic_id;
    }
    request->topics.back().partitions.push_back(sp.fetch);
  }
  // The next request's epoch: 1 after the one that opened the session.
  if (use->incremental) session->epoch = session->epoch == INT32_MAX ? 1 : session->epoch + 1;
  session->last_used = now;
  return net::Error::kNone;
}

bool FetchSessionCache::has_news(const Use& use, const net::FetchResponse& response) const {
  if (!use.incremental) return true;
  auto it = sessions_.find(use.id);
  if (it == sessions_.end()) return true;
  bool news = false;
  walk(it->second.by_id, it->second, response,
       [&](const FetchSessionPartition* sp, const auto&, const net::FetchResponse::PartitionData& out) {
         news = news || sp == nullptr || !unchanged(*sp, out);
       });
  return news;
}

void FetchSessionCache::finish(const Use& use, net::FetchResponse* response) {
  if (use.id == 0) return;
  response->session_id = use.id;
  auto it = sessions_.find(use.id);
  if (it == sessions_.end()) return;
  FetchSession& s = it->second;
  std::vector<bool> keep;  // per answer partition, in walk order
  walk(s.by_id, s, *response, [&](FetchSessionPartition* sp, const auto&, net::FetchResponse::PartitionData& out) {
    keep.push_back(sp == nullptr || !use.incremental || !unchanged(*sp, out));
    if (sp == nullptr) return;
    sp->high_watermark = out.high_watermark;
    sp->last_stable_offset = out.last_stable_offset;
    sp->log_start_offset = out.log_start_offset;
  });
  size_t i = 0;
  for (auto& t : response->responses) {
    std::vector<net::FetchResponse::PartitionData> kept;
    for (auto& out : t.partitions) {
      if (keep[i++]) kept.push_back(std::move(out));
    }
    t.partitions = std::move(kept);
  }
  std::erase_if(response->responses, [](const auto& t) { return t.partitions.empty(); });
}

}  // namespace brook::broker
