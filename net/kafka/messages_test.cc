// net/kafka/messages_test.cc: every generated message, every version.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <set>
#include <string>

#include "net/kafka/apis.h"
#include "net/kafka/message.h"
#include "net/kafka/test_random.h"
#include "net/kafka/testing.h"

namespace brook::net {
namespace {

TEST(Messages, EverySchemaIsGenerated) {
  // 88 API keys (request + response), two headers, and the record types.
  EXPECT_GE(all_message_cases().size(), 250u);
  std::set<int16_t> request_keys;
  for (const MessageCase& c : all_message_cases()) {
    if (c.kind == "request") request_keys.insert(c.api_key);
  }
  for (int16_t key = 0; key <= 87; ++key) {
    EXPECT_TRUE(request_keys.count(key)) << "api key " << key;
    ASSERT_NE(find_api(key), nullptr) << key;
    EXPECT_EQ(find_api(key)->key, key);
  }
  EXPECT_EQ(find_api(88), nullptr);
  EXPECT_EQ(find_api(-1), nullptr);
}

// Every message type x every valid version x 25 random instances.
TEST(Messages, RoundTripEveryVersion) {
  int checked = 0;
  for (const MessageCase& c : all_message_cases()) {
    for (int16_t v = c.min_version; v <= c.max_version; ++v) {
      for (uint64_t seed = 1; seed <= 25; ++seed) {
        const std::string error = c.round_trip(seed, v);
        ASSERT_EQ(error, "") << c.name << " v" << v << " seed " << seed;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 25 * 750);
}

// The same as a RapidCheck property: random type, version and instance.
RC_GTEST_PROP(Messages, RoundTripProperty, ()) {
  const auto cases = all_message_cases();
  const auto& c = cases[*rc::gen::inRange<size_t>(0, cases.size())];
  const auto v = *rc::gen::inRange<int>(c.min_version, c.max_version + 1);
  const auto seed = *rc::gen::arbitrary<uint64_t>();
  const std::string error = c.round_trip(seed, static_cast<int16_t>(v));
  RC_ASSERT(error == std::string());
}

// A strict prefix of a valid encoding never decodes, and never crashes.
TEST(Messages, TruncationAtEveryByteIsRejected) {
  for (const MessageCase& c : all_message_cases()) {
    for (int16_t v = c.min_version; v <= c.max_version; ++v) {
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        const io::Buffer full = c.sample(seed, v).linearize();
        ASSERT_TRUE(c.decode(full, v).ok()) << c.name << " v" << v;
        for (size_t n = 0; n < full.size(); ++n) {
          const io::Buffer prefix = io::Buffer::copy_of(full.span().first(n));
          EXPECT_FALSE(c.decode(prefix, v).ok()) << c.name << " v" << v << " prefix " << n;
        }
      }
    }
  }
}

// Random corruption: any outcome but a crash (ASan/UBSan watch the reads).
TEST(Messages, CorruptedBytesNeverCrash) {
  TestRandom rnd(7);
  size_t rejected = 0;
  size_t total = 0;
  for (const MessageCase& c : all_message_cases()) {
    for (int16_t v = c.min_version; v <= c.max_version; ++v) {
      const io::Buffer full = c.sample(rnd.next(), v).linearize();
      if (full.empty()) continue;
      for (int trial = 0; trial < 20; ++trial) {
        io::Buffer bad = io::Buffer::copy_of(full.span());
        const int flips = 1 + static_cast<int>(rnd.below(3));
        for (int i = 0; i < flips; ++i) {
          bad.mutable_data()[rnd.below(bad.size())] = static_cast<std::byte>(rnd.next());
        }
        rejected += c.decode(bad, v).ok() ? 0 : 1;
        ++total;
      }
    }
  }
  EXPECT_GT(rejected, total / 10);
}

io::Buffer bytes_of(std::initializer_list<int> values) {
  io::Buffer b = io::Buffer::allocate(values.size());
  size_t i = 0;
  for (int x : values) b.mutable_data()[i++] = static_cast<std::byte>(x);
  return b;
}

TEST(Messages, HostileLengthsAreRejected) {
  // MetadataRequest v1: topics array (int32 count) of names.
  EXPECT_FALSE(decode<MetadataRequest>(bytes_of({0x7f, 0xff, 0xff, 0xff}), 1).ok());
  EXPECT_FALSE(decode<MetadataRequest>(bytes_of({0x80, 0, 0, 0}), 1).ok());  // negative
  // One topic whose name claims 32767 bytes.
  EXPECT_FALSE(decode<MetadataRequest>(bytes_of({0, 0, 0, 1, 0x7f, 0xff, 'a'}), 1).ok());
  // A name of length -2.
  EXPECT_FALSE(decode<MetadataRequest>(bytes_of({0, 0, 0, 1, 0xff, 0xfe}), 1).ok());
  // MetadataRequest v9 (flexible): an unsigned varint that never ends.
  EXPECT_FALSE(decode<MetadataRequest>(bytes_of({0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), 9).ok());
  // A compact array claiming 2^32-2 elements.
  EXPECT_FALSE(decode<MetadataRequest>(bytes_of({0xff, 0xff, 0xff, 0xff, 0x0f}), 9).ok());
  // A tagged field whose size runs past the frame.
  EXPECT_FALSE(decode<MetadataRequest>(bytes_of({0x01, 0, 0, 0, 0x01, 0x05, 0x10, 1}), 9).ok());
  // Trailing bytes after a complete message.
  EXPECT_FALSE(decode<MetadataRequest>(bytes_of({0, 0, 0, 0, 0}), 1).ok());
  EXPECT_TRUE(decode<MetadataRequest>(bytes_of({0, 0, 0, 0}), 1).ok());
  // A null topics array is "all topics" from v1 on.
  auto all = decode<MetadataRequest>(bytes_of({0xff, 0xff, 0xff, 0xff}), 1);
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->topics.has_value());
  // ...and not allowed in v0.
  EXPECT_FALSE(decode<MetadataRequest>(bytes_of({0xff, 0xff, 0xff, 0xff}), 0).ok());
}

TEST(Messages, UnknownTaggedFieldsSurviveReencoding) {
  // ApiVersionsRequest v3: client software name and version, then one
  // tagged field (tag 9, 2 bytes) this code does not know.
  const io::Buffer in = bytes_of({0x02, 'a', 0x02, '1', 0x01, 0x09, 0x02, 0xab, 0xcd});
  auto req = decode<ApiVersionsRequest>(in, 3);
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->client_software_name, "a");
  ASSERT_EQ(req->unknown_tags.size(), 1u);
  EXPECT_EQ(req->unknown_tags[0].tag, 9u);
  auto out = encode(*req, 3);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->to_string(), std::string(in.view()));
}

TEST(Messages, NonDefaultFieldAtAVersionWithoutItFailsToEncode) {
  ProduceRequest req;
  req.transactional_id = "txn";  // exists from v3
  EXPECT_FALSE(encode(req, 2).ok());
  EXPECT_TRUE(encode(req, 3).ok());
  // Ignorable fields are dropped silently: RequestHeader's client id in v0.
  RequestHeader header;
  header.client_id = "c";
  EXPECT_TRUE(encode(header, 0).ok());
  EXPECT_FALSE(encode(req, 12).ok());  // no such version
}

TEST(Messages, RequestHeaderClientIdIsNeverCompact) {
  RequestHeader header;
  header.request_api_key = 18;
  header.request_api_version = 3;
  header.correlation_id = 7;
  header.client_id = "rdkafka";
  auto bytes = encode(header, 2);
  ASSERT_TRUE(bytes.ok());
  const std::string expected("\x00\x12\x00\x03\x00\x00\x00\x07\x00\x07rdkafka\x00", 18);
  EXPECT_EQ(bytes->to_string(), expected);
}

TEST(Messages, RecordsAreSplicedNotCopied) {
  ProduceRequest req;
  req.acks = -1;
  req.timeout_ms = 30000;
  auto& topic = req.topic_data.emplace_back();
  topic.name = "t";
  auto& part = topic.partition_data.emplace_back();
  const io::Buffer records = io::Buffer::copy_of(std::string(4096, 'x'));
  part.records = records;
  for (int16_t v : {3, 7, 9, 11}) {
    auto bytes = encode(req, v);
    ASSERT_TRUE(bytes.ok());
    bool found = false;
    for (const io::Buffer& piece : bytes->parts()) {
      found |= piece.data() == records.data() && piece.size() == records.size();
    }
    EXPECT_TRUE(found) << "v" << v;
    auto back = decode<ProduceRequest>(bytes->linearize(), v);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, req);
  }
}

TEST(Messages, FormatsReadably) {
  FindCoordinatorRequest req;
  req.key = "group-1";
  const std::string text = fmt::format("{}", req);
  EXPECT_NE(text.find("FindCoordinatorRequest{key='group-1'"), std::string::npos) << text;
}

TEST(Apis, HeaderVersions) {
  EXPECT_EQ(request_header_version(0, 8), 1);
  EXPECT_EQ(request_header_version(0, 9), 2);
  EXPECT_EQ(request_header_version(7, 0), 0);  // ControlledShutdown v0
  EXPECT_EQ(response_header_version(18, 3), 0);  // ApiVersions: always v0
  EXPECT_EQ(response_header_version(3, 9), 1);
  EXPECT_EQ(response_header_version(3, 8), 0);
  const ApiInfo* produce = find_api(0);
  ASSERT_NE(produce, nullptr);
  EXPECT_EQ(produce->name, "Produce");
  EXPECT_EQ(produce->max_version, 11);
  EXPECT_EQ(produce->first_flexible, 9);
  EXPECT_EQ(produce->listeners & kListenerBroker, kListenerBroker);
}

TEST(Apis, VisitGivesTheMessageTypes) {
  const std::string name = visit_api(
      3, [](auto req, auto) { return std::string(decltype(req)::type::kName); },
      [] { return std::string("unknown"); });
  EXPECT_EQ(name, "MetadataRequest");
  EXPECT_EQ(visit_api(
                200, [](auto, auto) { return 1; }, [] { return 0; }),
            0);
}

}  // namespace
}  // namespace brook::net
