// net/client/group_test.cc: the range assignor and the consumer protocol's
// subscription and assignment bytes.
#include "net/client/group.h"

#include <gtest/gtest.h>

namespace brook::client {
namespace {

TEST(RangeAssign, SplitsEachTopicInMemberOrder) {
  // Kafka's RangeAssignor: 7 partitions over 3 members give 3, 2, 2, in
  // member id order; a topic only some subscribe to goes to those.
  std::map<std::string, std::vector<std::string>> subs = {
      {"c", {"t", "u"}}, {"a", {"t"}}, {"b", {"t", "u"}}};
  auto out = range_assign(subs, {{"t", 7}, {"u", 3}});
  std::vector<TopicPartition> a = {{"t", 0}, {"t", 1}, {"t", 2}};
  std::vector<TopicPartition> b = {{"t", 3}, {"t", 4}, {"u", 0}, {"u", 1}};
  std::vector<TopicPartition> c = {{"t", 5}, {"t", 6}, {"u", 2}};
  EXPECT_EQ(out["a"], a);
  EXPECT_EQ(out["b"], b);
  EXPECT_EQ(out["c"], c);
  // More members than partitions: the last ones get nothing (but are named).
  auto few = range_assign({{"x", {"t"}}, {"y", {"t"}}}, {{"t", 1}});
  EXPECT_EQ(few["x"].size(), 1u);
  EXPECT_TRUE(few.contains("y"));
  EXPECT_TRUE(few["y"].empty());
}

TEST(ConsumerProtocol, SubscriptionAndAssignmentRoundTrip) {
  const io::Buffer sub = encode_subscription({"a", "b"});
  // Version 0: int16 version, then the topics array.
  ASSERT_GE(sub.size(), 6u);
  EXPECT_EQ(static_cast<int>(sub.data()[1]), 0);
  EXPECT_EQ(decode_subscription(sub).value(), (std::vector<std::string>{"a", "b"}));
  std::vector<TopicPartition> parts = {{"a", 0}, {"a", 2}, {"b", 1}};
  EXPECT_EQ(decode_assignment(encode_assignment(parts)).value(), parts);
  // A member with nothing assigned may get empty bytes.
  EXPECT_TRUE(decode_assignment(io::Buffer()).value().empty());
  EXPECT_FALSE(decode_assignment(io::Buffer::copy_of(std::string_view("\x00", 1))).ok());
}

}  // namespace
}  // namespace brook::client
