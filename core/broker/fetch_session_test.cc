// core/broker/fetch_session_test.cc
#include "core/broker/fetch_session.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace brook::broker {
namespace {

using Use = FetchSessionCache::Use;

constexpr int16_t kVersion = 12;  // topic names

net::FetchRequest request(int32_t id, int32_t epoch, std::vector<std::pair<int32_t, int64_t>> partitions,
                          std::vector<int32_t> forget = {}) {
  net::FetchRequest r;
  r.session_id = id;
  r.session_epoch = epoch;
  if (!partitions.empty()) {
    auto& t = r.topics.emplace_back();
    t.topic = "t";
    for (auto [p, offset] : partitions) {
      auto& fp = t.partitions.emplace_back();
      fp.partition = p;
      fp.fetch_offset = offset;
    }
  }
  if (!forget.empty()) {
    auto& f = r.forgotten_topics_data.emplace_back();
    f.topic = "t";
    f.partitions = std::move(forget);
  }
  return r;
}

std::vector<std::pair<int32_t, int64_t>> fetched(const net::FetchRequest& r) {
  std::vector<std::pair<int32_t, int64_t>> out;
  for (const auto& t : r.topics) {
    for (const auto& p : t.partitions) out.emplace_back(p.partition, p.fetch_offset);
  }
  return out;
}

// An answer for what `r` fetches: every partition at high watermark `hw`,
// with records for those in `with_records`.
net::FetchResponse answer(const net::FetchRequest& r, int64_t hw, std::vector<int32_t> with_records = {}) {
  net::FetchResponse resp;
  for (const auto& t : r.topics) {
    auto& to = resp.responses.emplace_back();
    to.topic = t.topic;
    for (const auto& p : t.partitions) {
      auto& out = to.partitions.emplace_back();
      out.partition_index = p.partition;
      out.high_watermark = hw;
      out.last_stable_offset = hw;
      out.log_start_offset = 0;
      out.records = io::Buffer();
      if (std::find(with_records.begin(), with_records.end(), p.partition) != with_records.end()) {
        out.records = io::Buffer::copy_of("records");
      }
    }
  }
  return resp;
}

std::vector<int32_t> answered(const net::FetchResponse& resp) {
  std::vector<int32_t> out;
  for (const auto& t : resp.responses) {
    for (const auto& p : t.partitions) out.push_back(p.partition_index);
  }
  return out;
}

class FetchSessionTest : public ::testing::Test {
 protected:
  net::Error begin(net::FetchRequest* r, Use* use, int16_t version = kVersion) {
    now_ += std::chrono::milliseconds(1);
    return cache_.begin(r, version, now_, random_, use);
  }

  FetchSessionCache cache_{3};
  io::Random random_{42};
  io::Instant now_{};
};

TEST_F(FetchSessionTest, IncrementalRequestsNameOnlyChangesAndAnswersOnlyNews) {
  net::FetchRequest full = request(0, 0, {{0, 10}, {1, 20}, {2, 30}});
  Use use;
  ASSERT_EQ(begin(&full, &use), net::Error::kNone);
  ASSERT_NE(use.id, 0);
  EXPECT_FALSE(use.incremental);
  net::FetchResponse first = answer(full, 100);
  EXPECT_TRUE(cache_.has_news(use, first));
  cache_.finish(use, &first);
  EXPECT_EQ(first.session_id, use.id);
  EXPECT_EQ(answered(first), (std::vector<int32_t>{0, 1, 2}));  // a full answer names all

  // Epoch 1: partition 1 moved on; the request fetches the whole session.
  net::FetchRequest inc = request(use.id, 1, {{1, 25}});
  Use use1;
  ASSERT_EQ(begin(&inc, &use1), net::Error::kNone);
  EXPECT_TRUE(use1.incremental);
  EXPECT_EQ(fetched(inc), (std::vector<std::pair<int32_t, int64_t>>{{0, 10}, {1, 25}, {2, 30}}));
  net::FetchResponse quiet = answer(inc, 100);
  EXPECT_FALSE(cache_.has_news(use1, quiet));  // nothing new: the broker would wait
  net::FetchResponse some = answer(inc, 100, {2});
  EXPECT_TRUE(cache_.has_news(use1, some));
  cache_.finish(use1, &some);
  EXPECT_EQ(answered(some), (std::vector<int32_t>{2}));

  // Epoch 2: forget partition 0; a moved high watermark is news.
  net::FetchRequest inc2 = request(use.id, 2, {}, {0});
  Use use2;
  ASSERT_EQ(begin(&inc2, &use2), net::Error::kNone);
  EXPECT_EQ(fetched(inc2), (std::vector<std::pair<int32_t, int64_t>>{{1, 25}, {2, 30}}));
  net::FetchResponse hw = answer(inc2, 100);
  hw.responses[0].partitions[0].high_watermark = 120;  // partition 1
  cache_.finish(use2, &hw);
  EXPECT_EQ(answered(hw), (std::vector<int32_t>{1}));
  EXPECT_EQ(cache_.find(use.id)->partitions[0].high_watermark, 120);
}

TEST_F(FetchSessionTest, EpochAndIdErrors) {
  net::FetchRequest full = request(0, 0, {{0, 0}});
  Use use;
  ASSERT_EQ(begin(&full, &use), net::Error::kNone);
  net::FetchRequest unknown = request(use.id + 1, 1, {});
  Use u;
  EXPECT_EQ(begin(&unknown, &u), net::Error::kFetchSessionIdNotFound);
  net::FetchRequest stale = request(use.id, 2, {});
  EXPECT_EQ(begin(&stale, &u), net::Error::kInvalidFetchSessionEpoch);
  net::FetchRequest by_id = request(use.id, 1, {});
  EXPECT_EQ(begin(&by_id, &u, 13), net::Error::kFetchSessionTopicIdError);
  net::FetchRequest ok = request(use.id, 1, {});
  EXPECT_EQ(begin(&ok, &u), net::Error::kNone);
  // The epoch moved on: the same request again is stale.
  net::FetchRequest again = request(use.id, 1, {});
  EXPECT_EQ(begin(&again, &u), net::Error::kInvalidFetchSessionEpoch);
  // Epoch -1 closes the session; the request fetches what it names.
  net::FetchRequest close = request(use.id, -1, {{3, 7}});
  ASSERT_EQ(begin(&close, &u), net::Error::kNone);
  EXPECT_EQ(u.id, 0);
  EXPECT_EQ(fetched(close), (std::vector<std::pair<int32_t, int64_t>>{{3, 7}}));
  EXPECT_EQ(cache_.find(use.id), nullptr);
  // Before v7 there are no sessions.
  net::FetchRequest old = request(0, 0, {{0, 0}});
  ASSERT_EQ(begin(&old, &u, 6), net::Error::kNone);
  EXPECT_EQ(u.id, 0);
}

TEST_F(FetchSessionTest, FullCacheEvictsTheLeastRecentlyUsed) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 3; ++i) {
    net::FetchRequest r = request(0, 0, {{i, 0}});
    Use use;
    ASSERT_EQ(begin(&r, &use), net::Error::kNone);
    ids.push_back(use.id);
  }
  // Use the first again: the second is now the oldest.
  net::FetchRequest touch = request(ids[0], 1, {});
  Use use;
  ASSERT_EQ(begin(&touch, &use), net::Error::kNone);
  net::FetchRequest fourth = request(0, 0, {{9, 0}});
  ASSERT_EQ(begin(&fourth, &use), net::Error::kNone);
  EXPECT_EQ(cache_.size(), 3u);
  EXPECT_NE(cache_.find(ids[0]), nullptr);
  EXPECT_EQ(cache_.find(ids[1]), nullptr);
  EXPECT_NE(cache_.find(ids[2]), nullptr);
  net::FetchRequest evicted = request(ids[1], 1, {});
  EXPECT_EQ(begin(&evicted, &use), net::Error::kFetchSessionIdNotFound);
}

TEST_F(FetchSessionTest, AnAnswerForAChangedSessionIsKeptWhole) {
  net::FetchRequest full = request(0, 0, {{0, 0}, {1, 0}});
  Use use;
  ASSERT_EQ(begin(&full, &use), net::Error::kNone);
  net::FetchResponse first = answer(full, 5);
  cache_.finish(use, &first);
  net::FetchRequest inc = request(use.id, 1, {});
  Use use1;
  ASSERT_EQ(begin(&inc, &use1), net::Error::kNone);
  net::FetchResponse resp = answer(inc, 5);
  // Meanwhile the session lost partition 0 (the answer no longer lines up).
  net::FetchRequest forget = request(use.id, 2, {}, {0});
  Use use2;
  ASSERT_EQ(begin(&forget, &use2), net::Error::kNone);
  EXPECT_TRUE(cache_.has_news(use1, resp));
  cache_.finish(use1, &resp);
  EXPECT_EQ(answered(resp), (std::vector<int32_t>{0, 1}));
}

}  // namespace
}  // namespace brook::broker
