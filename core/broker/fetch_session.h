// core/broker/fetch_session.h
//
// Incremental fetch sessions (KIP-227): the broker's side. A client opens
// a session with a full Fetch (epoch 0); later requests carry the session
// id and the next epoch and name only the partitions whose fetch position
// changed (and those to forget); the answers name only the partitions with
// something new: records, an error, a diverging epoch, or a high watermark,
// last stable offset or log start offset other than the last answer told.
//
// The cache holds max.incremental.fetch.session.cache.slots sessions and
// evicts the least recently used when full; an evicted client learns it
// from FETCH_SESSION_ID_NOT_FOUND and opens a new session.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/random.h"
#include "io/time.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/fetch_request.h"
#include "net/kafka/messages/fetch_response.h"

namespace brook::broker {

struct FetchSessionPartition {
  std::string topic;
  net::Uuid topic_id;
  net::FetchRequest::FetchPartition fetch;
  // What the last answer told the client.
  int64_t high_watermark = -1;
  int64_t last_stable_offset = -1;
  int64_t log_start_offset = -1;
};

struct FetchSession {
  int32_t id = 0;
  int32_t epoch = 1;   // the epoch the next request must carry
  bool by_id = false;  // topic ids (Fetch v13+) or names
  std::vector<FetchSessionPartition> partitions;
  io::Instant last_used{};
};

// max.incremental.fetch.session.cache.slots
inline constexpr size_t kFetchSessionSlots = 1000;

class FetchSessionCache {
 public:
  explicit FetchSessionCache(size_t slots = kFetchSessionSlots) : slots_(slots) {}

  // The session a request belongs to: id 0 for none (a sessionless
  // request, or one that closes its session).
  struct Use {
    int32_t id = 0;
    bool incremental = false;
  };

  // Resolves a Fetch request's session fields: epoch -1 is a full request
  // without a session (closing the one named), 0 a full request opening a
  // new session, a positive epoch an incremental request in the named one.
  // A session's partitions are then updated from the request (added,
  // changed, forgotten) and the request rewritten to fetch all of them.
  // Errors: FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
  // FETCH_SESSION_TOPIC_ID_ERROR (ids in a session of names, or back).
  net::Error begin(net::FetchRequest* request, int16_t version, io::Instant now, io::Random& random, Use* use);

  // Whether an answer has something for the client: always for a full
  // request; for an incremental one, some partition that is not unchanged
  // since the session's last answer.
  bool has_news(const Use& use, const net::FetchResponse& response) const;

  // Records what `response` tells each partition; an incremental answer
  // keeps only the partitions with news. (A session evicted while its
  // request waited is left alone: the client learns it next time.)
  void finish(const Use& use, net::FetchResponse* response);

  const FetchSession* find(int32_t id) const;
  size_t size() const { return sessions_.size(); }

 private:
  FetchSession& create(bool by_id, io::Instant now, io::Random& random);

  size_t slots_;
  std::map<int32_t, FetchSession> sessions_;
};

}  // namespace brook::broker
