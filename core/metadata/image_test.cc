// core/metadata/image_test.cc: metadata record serde, image replay, deltas,
// snapshots and the image hash.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/metadata/image.h"
#include "core/metadata/record_serde.h"
#include "net/kafka/message.h"
#include "net/kafka/testing.h"

namespace brook::metadata {
namespace {

template <typename F>
void for_each_record_type(F&& f) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    (f(std::type_identity<std::variant_alternative_t<I, MetadataRecord>>{}), ...);
  }(std::make_index_sequence<std::variant_size_v<MetadataRecord>>{});
}

const net::MessageCase* find_case(std::string_view name) {
  for (const net::MessageCase& c : net::all_message_cases()) {
    if (c.name == name && c.kind == "record") return &c;
  }
  return nullptr;
}

io::Buffer bytes_of(std::initializer_list<int> bytes) {
  io::Buffer b = io::Buffer::allocate(bytes.size());
  size_t i = 0;
  for (int x : bytes) b.mutable_data()[i++] = static_cast<std::byte>(x);
  return b;
}

io::Buffer concat(const io::Buffer& a, const io::Buffer& b) {
  std::string s(a.view());
  s += b.view();
  return io::Buffer::copy_of(std::string_view(s));
}

// ---------------------------------------------------------------------------
// Serde.

TEST(RecordSerde, TypesAreInApiKeyOrderAndUnique) {
  std::vector<int16_t> keys;
  for_each_record_type([&]<typename M>(std::type_identity<M>) { keys.push_back(M::kApiKey); });
  EXPECT_EQ(keys.size(), 25u);
  for (size_t i = 1; i < keys.size(); ++i) EXPECT_LT(keys[i - 1], keys[i]);
  EXPECT_EQ(record_name(int16_t{2}), std::optional<std::string_view>("TopicRecord"));
  EXPECT_EQ(record_name(int16_t{27}), std::optional<std::string_view>("RegisterControllerRecord"));
  EXPECT_EQ(record_name(int16_t{6}), std::nullopt);
  EXPECT_EQ(record_name(int16_t{16}), std::nullopt);
  EXPECT_EQ(record_name(int16_t{-1}), std::nullopt);
}

// Every metadata record type x every version x 25 random instances (from the
// generated test instances): framing, encoding and decoding agree.
TEST(RecordSerde, RoundTripEveryTypeAndVersion) {
  int checked = 0;
  for_each_record_type([&]<typename M>(std::type_identity<M>) {
    const net::MessageCase* c = find_case(M::kName);
    ASSERT_NE(c, nullptr) << M::kName;
    ASSERT_EQ(c->api_key, M::kApiKey);
    for (int16_t v = M::kLowestVersion; v <= M::kHighestVersion; ++v) {
      for (uint64_t seed = 1; seed <= 25; ++seed) {
        const io::Buffer body = c->sample(seed, v).linearize();
        absl::StatusOr<M> m = net::decode<M>(body, v);
        ASSERT_TRUE(m.ok()) << M::kName << " v" << v << ": " << m.status();
        const MetadataRecord record(*m);
        EXPECT_EQ(api_key(record), M::kApiKey);
        EXPECT_EQ(record_name(record), M::kName);
        EXPECT_EQ(lowest_version(record), M::kLowestVersion);
        EXPECT_EQ(highest_version(record), M::kHighestVersion);

        absl::StatusOr<io::Buffer> value = encode_metadata_record(record, v);
        ASSERT_TRUE(value.ok()) << M::kName << " v" << v << ": " << value.status();
        // The frame: version 1, api key, version (each one byte here), body.
        ASSERT_GE(value->size(), 3u);
        EXPECT_EQ(value->data()[0], std::byte{1});
        EXPECT_EQ(value->data()[1], static_cast<std::byte>(M::kApiKey));
        EXPECT_EQ(value->data()[2], static_cast<std::byte>(v));
        EXPECT_EQ(value->slice(3).view(), body.view()) << M::kName << " v" << v;

        absl::StatusOr<MetadataRecordAndVersion> back = decode_metadata_record(*value);
        ASSERT_TRUE(back.ok()) << M::kName << " v" << v << ": " << back.status();
        EXPECT_EQ(back->version, v);
        ASSERT_TRUE(std::holds_alternative<M>(back->record)) << to_string(*back);
        EXPECT_TRUE(std::get<M>(back->record) == *m)
            << "sent " << to_string(record) << "\ngot  " << to_string(back->record);
        absl::StatusOr<io::Buffer> again = encode_metadata_record(*back);
        ASSERT_TRUE(again.ok());
        EXPECT_EQ(again->view(), value->view());
        ++checked;
      }
    }
  });
  EXPECT_EQ(checked, 25 * 34);
}

// The bytes Kafka's MetadataRecordSerde writes for a TopicRecord.
TEST(RecordSerde, TopicRecordBytes) {
  net::TopicRecord t;
  t.name = "foo";
  for (uint8_t i = 0; i < 16; ++i) t.topic_id.bytes[i] = i;
  absl::StatusOr<io::Buffer> value = encode_metadata_record(t, 0);
  ASSERT_TRUE(value.ok());
  const io::Buffer expected = bytes_of({1, 2, 0,                  // frame, api key, version
                                        4, 'f', 'o', 'o',         // compact string
                                        0, 1, 2, 3, 4, 5, 6, 7,   // topic id
                                        8, 9, 10, 11, 12, 13, 14, 15,
                                        0});                      // no tagged fields
  EXPECT_EQ(value->view(), expected.view());
  EXPECT_EQ(to_string(MetadataRecordAndVersion{t, 0}).substr(0, 15), "v0 TopicRecord{");
}

TEST(RecordSerde, Errors) {
  net::TopicRecord t;
  t.name = "foo";
  const io::Buffer good = *encode_metadata_record(t, 0);
  const io::Buffer body = good.slice(3);
  auto error = [](const io::Buffer& b) {
    absl::StatusOr<MetadataRecordAndVersion> r = decode_metadata_record(b);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  EXPECT_NE(error(io::Buffer()).find("truncated frame version"), std::string::npos);
  EXPECT_NE(error(bytes_of({1})).find("truncated api key"), std::string::npos);
  EXPECT_NE(error(bytes_of({1, 2})).find("truncated version"), std::string::npos);
  EXPECT_NE(error(concat(bytes_of({0, 2, 0}), body)).find("unknown frame version 0"),
            std::string::npos);
  EXPECT_NE(error(concat(bytes_of({2, 2, 0}), body)).find("unknown frame version 2"),
            std::string::npos);
  EXPECT_NE(error(concat(bytes_of({1, 6, 0}), body)).find("unknown metadata record api key 6"),
            std::string::npos);
  EXPECT_NE(error(concat(bytes_of({1, 99, 0}), body)).find("api key 99"), std::string::npos);
  // 40000 as an unsigned varint: beyond int16.
  EXPECT_NE(error(bytes_of({1, 0xc0, 0xb8, 0x02, 0})).find("api key 40000"), std::string::npos);
  EXPECT_NE(error(concat(bytes_of({1, 2, 0xc0, 0xb8, 0x02}), body)).find("version 40000"),
            std::string::npos);
  EXPECT_NE(error(concat(bytes_of({1, 2, 1}), body)).find("TopicRecord has no version 1"),
            std::string::npos);
  EXPECT_NE(error(concat(good, bytes_of({0}))).find("1 unexpected bytes"), std::string::npos);
  EXPECT_NE(error(good.slice(0, good.size() - 1)).find("TopicRecord v0"), std::string::npos);
  // A malformed varint in the header.
  EXPECT_NE(error(bytes_of({0x80, 0x80, 0x80, 0x80, 0x80, 0x01})).find("frame version"),
            std::string::npos);

  absl::StatusOr<io::Buffer> bad_version = encode_metadata_record(t, 1);
  EXPECT_FALSE(bad_version.ok());
  EXPECT_NE(bad_version.status().message().find("TopicRecord has no version 1"),
            std::string_view::npos);
  // A field the version cannot carry: directories before PartitionRecord v1.
  net::PartitionRecord p;
  p.replicas = {1};
  p.directories = {net::Uuid{}};
  EXPECT_FALSE(encode_metadata_record(p, 0).ok());
  EXPECT_TRUE(encode_metadata_record(p, 1).ok());
}

// A strict prefix of a record value never decodes.
TEST(RecordSerde, EveryTruncationIsRejected) {
  for_each_record_type([&]<typename M>(std::type_identity<M>) {
    const net::MessageCase* c = find_case(M::kName);
    ASSERT_NE(c, nullptr);
    for (int16_t v = M::kLowestVersion; v <= M::kHighestVersion; ++v) {
      const M m = *net::decode<M>(c->sample(3, v).linearize(), v);
      const io::Buffer full = *encode_metadata_record(MetadataRecord(m), v);
      for (size_t n = 0; n < full.size(); ++n) {
        EXPECT_FALSE(decode_metadata_record(full.slice(0, n)).ok())
            << M::kName << " v" << v << " prefix " << n;
      }
    }
  });
}

// Arbitrary bytes after a valid header: any outcome but a crash.
RC_GTEST_PROP(RecordSerdeProperty, ArbitraryValuesNeverCrash, ()) {
  const auto key = *rc::gen::inRange<int>(0, 30);
  const auto version = *rc::gen::inRange<int>(0, 4);
  const auto tail = *rc::gen::container<std::vector<uint8_t>>(rc::gen::arbitrary<uint8_t>());
  std::string s{char{1}, static_cast<char>(key), static_cast<char>(version)};
  for (uint8_t b : tail) s += static_cast<char>(b);
  absl::StatusOr<MetadataRecordAndVersion> r =
      decode_metadata_record(io::Buffer::copy_of(std::string_view(s)));
  if (r.ok()) {
    // What decodes encodes to bytes that decode and encode alike (compared
    // as bytes: a value may hold a NaN).
    RC_ASSERT(api_key(r->record) == key);
    absl::StatusOr<io::Buffer> again = encode_metadata_record(*r);
    RC_ASSERT(again.ok());
    absl::StatusOr<MetadataRecordAndVersion> back = decode_metadata_record(*again);
    RC_ASSERT(back.ok());
    RC_ASSERT(encode_metadata_record(*back)->view() == again->view());
  }
}

// ---------------------------------------------------------------------------
// Replay scenarios.

net::Uuid uuid(uint8_t n, uint8_t tag = 0x10) {
  net::Uuid u;
  u.bytes[0] = tag;
  u.bytes[15] = n;
  return u;
}

net::RegisterBrokerRecord broker_record(int32_t id, int64_t epoch) {
  net::RegisterBrokerRecord r;
  r.broker_id = id;
  r.broker_epoch = epoch;
  r.incarnation_id = uuid(static_cast<uint8_t>(id), 0x20);
  net::RegisterBrokerRecord::BrokerEndpoint e;
  e.name = "PLAINTEXT";
  e.host = "broker" + std::to_string(id);
  e.port = 9092;
  e.security_protocol = 0;
  r.end_points.push_back(e);
  net::RegisterBrokerRecord::BrokerFeature f;
  f.name = "metadata.version";
  f.min_supported_version = 1;
  f.max_supported_version = 20;
  r.features.push_back(f);
  r.rack = "rack" + std::to_string(id % 2);
  return r;
}

net::TopicRecord topic_record(std::string name, net::Uuid id) {
  net::TopicRecord r;
  r.name = std::move(name);
  r.topic_id = id;
  return r;
}

net::PartitionRecord partition_record(net::Uuid topic, int32_t partition,
                                      std::vector<int32_t> replicas) {
  net::PartitionRecord r;
  r.topic_id = topic;
  r.partition_id = partition;
  r.replicas = replicas;
  r.isr = replicas;
  r.leader = replicas.empty() ? kNoLeader : replicas[0];
  r.leader_epoch = 0;
  r.partition_epoch = 0;
  return r;
}

net::PartitionChangeRecord change_record(net::Uuid topic, int32_t partition) {
  net::PartitionChangeRecord r;
  r.topic_id = topic;
  r.partition_id = partition;
  return r;
}

net::ConfigRecord config_record(int8_t type, std::string name, std::string key,
                                std::optional<std::string> value) {
  net::ConfigRecord r;
  r.resource_type = type;
  r.resource_name = std::move(name);
  r.name = std::move(key);
  r.value = std::move(value);
  return r;
}

net::FeatureLevelRecord feature_record(std::string name, int16_t level) {
  net::FeatureLevelRecord r;
  r.name = std::move(name);
  r.feature_level = level;
  return r;
}

// Applies records at offsets 0, 1, ... in one delta; every one must apply.
MetadataImage replay(const MetadataImage& base, const std::vector<MetadataRecord>& records) {
  MetadataDelta delta(base);
  const int64_t first = base.provenance().last_offset + 1;
  for (size_t i = 0; i < records.size(); ++i) {
    absl::Status s = delta.apply(records[i], first + static_cast<int64_t>(i), 1);
    EXPECT_TRUE(s.ok()) << s << "\n" << to_string(records[i]);
  }
  return delta.build();
}

MetadataImage replay(const std::vector<MetadataRecord>& records) {
  return replay(MetadataImage(), records);
}

const net::Uuid kFoo = uuid(1);
const net::Uuid kBar = uuid(2);

MetadataImage cluster_with_foo() {
  return replay({feature_record("metadata.version", 20), broker_record(1, 10),
                 broker_record(2, 20), broker_record(3, 30), topic_record("foo", kFoo),
                 partition_record(kFoo, 0, {1, 2, 3}), partition_record(kFoo, 1, {2, 3, 1})});
}

TEST(MetadataImage, EmptyImage) {
  const MetadataImage image;
  EXPECT_TRUE(image.empty());
  EXPECT_EQ(image.provenance(), MetadataProvenance{});
  EXPECT_TRUE(image.to_records().empty());
  EXPECT_EQ(image, MetadataImage());
  EXPECT_EQ(image.hash(), MetadataImage().hash());
  EXPECT_EQ(image.topics().topic("foo"), nullptr);
  EXPECT_EQ(image.cluster().broker(1), nullptr);
}

TEST(MetadataImage, CreateTopicAndPartitions) {
  const MetadataImage image = cluster_with_foo();
  EXPECT_FALSE(image.empty());
  EXPECT_EQ(image.provenance(), (MetadataProvenance{6, 1}));
  EXPECT_EQ(image.features().metadata_version, 20);
  ASSERT_EQ(image.cluster().brokers.size(), 3u);
  const BrokerRegistration* b = image.cluster().broker(2);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->epoch, 20);
  EXPECT_TRUE(b->fenced);  // RegisterBrokerRecord's default
  EXPECT_EQ(b->rack, "rack0");
  EXPECT_EQ(b->listeners.at("PLAINTEXT"), (Endpoint{"broker2", 9092, 0}));
  EXPECT_EQ(b->supported_features.at("metadata.version"), (VersionRange{1, 20}));

  const TopicImage* foo = image.topics().topic("foo");
  ASSERT_NE(foo, nullptr);
  EXPECT_EQ(foo, image.topics().topic(kFoo));
  EXPECT_EQ(foo->name, "foo");
  EXPECT_EQ(foo->partitions.size(), 2u);
  const PartitionRegistration* p = image.topics().partition(kFoo, 1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->replicas, (std::vector<int32_t>{2, 3, 1}));
  EXPECT_EQ(p->isr, (std::vector<int32_t>{2, 3, 1}));
  EXPECT_EQ(p->leader, 2);
  EXPECT_EQ(p->leader_epoch, 0);
  EXPECT_EQ(p->partition_epoch, 0);
  // No directories in the record: every replica is "migrating".
  EXPECT_EQ(p->directories, std::vector<net::Uuid>(3, kDirectoryMigrating));
  EXPECT_EQ(image.topics().partition(kFoo, 2), nullptr);
  EXPECT_EQ(image.topics().partition(kBar, 0), nullptr);
}

TEST(MetadataImage, PartitionOfUnknownTopicIsAnError) {
  MetadataDelta delta{cluster_with_foo()};
  absl::Status s = delta.apply(partition_record(kBar, 0, {1}));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  s = delta.apply(partition_record(kFoo, -1, {1}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  net::PartitionRecord bad_dirs = partition_record(kFoo, 5, {1, 2});
  bad_dirs.directories = {uuid(9)};
  EXPECT_EQ(delta.apply(bad_dirs).code(), absl::StatusCode::kInvalidArgument);
  net::PartitionRecord bad_state = partition_record(kFoo, 5, {1, 2});
  bad_state.leader_recovery_state = 2;
  EXPECT_EQ(delta.apply(bad_state).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(delta.build(), delta.base());
}

TEST(MetadataImage, IsrChangeBumpsOnlyThePartitionEpoch) {
  const MetadataImage base = cluster_with_foo();
  net::PartitionChangeRecord c = change_record(kFoo, 0);
  c.isr = std::vector<int32_t>{1, 2};
  const MetadataImage image = replay(base, {c});
  const PartitionRegistration* p = image.topics().partition(kFoo, 0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->isr, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(p->replicas, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(p->leader, 1);
  EXPECT_EQ(p->leader_epoch, 0);
  EXPECT_EQ(p->partition_epoch, 1);
  // The other partition is untouched.
  EXPECT_EQ(*image.topics().partition(kFoo, 1), *base.topics().partition(kFoo, 1));

  // A change record with nothing set still bumps the partition epoch.
  const MetadataImage again = replay(image, {change_record(kFoo, 0)});
  EXPECT_EQ(again.topics().partition(kFoo, 0)->partition_epoch, 2);
  EXPECT_EQ(again.topics().partition(kFoo, 0)->isr, (std::vector<int32_t>{1, 2}));
}

TEST(MetadataImage, LeaderChangeBumpsBothEpochs) {
  net::PartitionChangeRecord to2 = change_record(kFoo, 0);
  to2.leader = 2;
  net::PartitionChangeRecord none = change_record(kFoo, 0);
  none.leader = kNoLeader;
  none.isr = std::vector<int32_t>{};
  net::PartitionChangeRecord to3 = change_record(kFoo, 0);
  to3.leader = 3;
  to3.isr = std::vector<int32_t>{3};
  to3.leader_recovery_state = 1;
  net::PartitionChangeRecord same = change_record(kFoo, 0);
  same.leader = 3;
  same.leader_recovery_state = 0;

  MetadataImage image = replay(cluster_with_foo(), {to2});
  const PartitionRegistration* p = image.topics().partition(kFoo, 0);
  EXPECT_EQ(p->leader, 2);
  EXPECT_EQ(p->leader_epoch, 1);
  EXPECT_EQ(p->partition_epoch, 1);

  image = replay(image, {none});
  p = image.topics().partition(kFoo, 0);
  EXPECT_EQ(p->leader, kNoLeader);
  EXPECT_TRUE(p->isr.empty());
  EXPECT_EQ(p->leader_epoch, 2);
  EXPECT_EQ(p->partition_epoch, 2);

  image = replay(image, {to3, same});
  p = image.topics().partition(kFoo, 0);
  EXPECT_EQ(p->leader, 3);
  EXPECT_EQ(p->isr, (std::vector<int32_t>{3}));
  // Re-electing the same leader is still a leader change.
  EXPECT_EQ(p->leader_epoch, 4);
  EXPECT_EQ(p->partition_epoch, 4);
  EXPECT_EQ(p->leader_recovery_state, 0);
}

TEST(MetadataImage, ReassignmentAndDirectories) {
  net::PartitionRecord pr = partition_record(kFoo, 2, {1, 2, 3});
  pr.directories = {uuid(1, 0x30), uuid(2, 0x30), uuid(3, 0x30)};
  net::PartitionChangeRecord move = change_record(kFoo, 2);
  move.replicas = std::vector<int32_t>{3, 4, 1};
  move.adding_replicas = std::vector<int32_t>{4};
  move.removing_replicas = std::vector<int32_t>{2};
  MetadataImage image = replay(cluster_with_foo(), {pr, move});
  const PartitionRegistration* p = image.topics().partition(kFoo, 2);
  EXPECT_EQ(p->replicas, (std::vector<int32_t>{3, 4, 1}));
  EXPECT_EQ(p->adding_replicas, (std::vector<int32_t>{4}));
  EXPECT_EQ(p->removing_replicas, (std::vector<int32_t>{2}));
  // Replicas keep their directories; a new one is unassigned.
  EXPECT_EQ(p->directories,
            (std::vector<net::Uuid>{uuid(3, 0x30), kDirectoryUnassigned, uuid(1, 0x30)}));
  EXPECT_EQ(p->leader_epoch, 0);

  net::PartitionChangeRecord dirs = change_record(kFoo, 2);
  dirs.directories = std::vector<net::Uuid>{uuid(7), uuid(8), uuid(9)};
  dirs.eligible_leader_replicas = std::vector<int32_t>{1};
  dirs.last_known_elr = std::vector<int32_t>{4};
  image = replay(image, {dirs});
  p = image.topics().partition(kFoo, 2);
  EXPECT_EQ(p->directories, (std::vector<net::Uuid>{uuid(7), uuid(8), uuid(9)}));
  EXPECT_EQ(p->elr, (std::vector<int32_t>{1}));
  EXPECT_EQ(p->last_known_elr, (std::vector<int32_t>{4}));
}

TEST(MetadataImage, BadPartitionChangesAreErrorsAndChangeNothing) {
  const MetadataImage base = cluster_with_foo();
  MetadataDelta delta(base);
  EXPECT_EQ(delta.apply(change_record(kBar, 0)).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(delta.apply(change_record(kFoo, 7)).code(), absl::StatusCode::kNotFound);
  net::PartitionChangeRecord state = change_record(kFoo, 0);
  state.leader_recovery_state = 3;
  EXPECT_EQ(delta.apply(state).code(), absl::StatusCode::kInvalidArgument);
  net::PartitionChangeRecord dirs = change_record(kFoo, 0);
  dirs.directories = std::vector<net::Uuid>{uuid(1)};
  EXPECT_EQ(delta.apply(dirs).code(), absl::StatusCode::kInvalidArgument);
  dirs.replicas = std::vector<int32_t>{1, 2};
  EXPECT_EQ(delta.apply(dirs).code(), absl::StatusCode::kInvalidArgument);
  absl::Status s = delta.apply(change_record(kFoo, 9), 100, 4);
  EXPECT_NE(s.message().find("offset 100"), std::string_view::npos) << s;
  const MetadataImage after = delta.build();
  EXPECT_EQ(after, base);
  EXPECT_EQ(after.hash(), base.hash());
}

TEST(MetadataImage, RemoveTopic) {
  const MetadataImage base =
      replay(cluster_with_foo(), {config_record(kConfigResourceTopic, "foo", "retention.ms", "1"),
                                  config_record(kConfigResourceTopic, "bar", "retention.ms", "2"),
                                  config_record(kConfigResourceBroker, "foo", "x", "3")});
  net::RemoveTopicRecord remove;
  remove.topic_id = kFoo;
  MetadataImage image = replay(base, {remove});
  EXPECT_EQ(image.topics().topic(kFoo), nullptr);
  EXPECT_EQ(image.topics().topic("foo"), nullptr);
  EXPECT_TRUE(image.topics().by_id.empty());
  EXPECT_TRUE(image.topics().by_name.empty());
  // Its topic configs go; others stay.
  EXPECT_EQ(image.configs().find({kConfigResourceTopic, "foo"}), nullptr);
  EXPECT_NE(image.configs().find({kConfigResourceTopic, "bar"}), nullptr);
  EXPECT_NE(image.configs().find({kConfigResourceBroker, "foo"}), nullptr);

  MetadataDelta delta(image);
  EXPECT_EQ(delta.apply(remove).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(delta.apply(partition_record(kFoo, 0, {1})).code(), absl::StatusCode::kNotFound);

  // The name can be reused with a new id, even within one delta.
  image = replay(base, {remove, topic_record("foo", kBar), partition_record(kBar, 0, {2})});
  ASSERT_NE(image.topics().topic("foo"), nullptr);
  EXPECT_EQ(image.topics().topic("foo")->id, kBar);
  EXPECT_EQ(image.topics().topic(kFoo), nullptr);
  EXPECT_EQ(image.topics().topic("foo")->partitions.size(), 1u);

  // A topic created and removed in one delta leaves nothing.
  net::RemoveTopicRecord remove_bar;
  remove_bar.topic_id = kBar;
  image = replay(cluster_with_foo(), {topic_record("bar", kBar), remove_bar});
  EXPECT_EQ(image.topics().by_id.size(), 1u);
  EXPECT_EQ(image.topics().by_name.size(), 1u);
}

TEST(MetadataImage, DuplicateTopicsAreErrors) {
  MetadataDelta delta(cluster_with_foo());
  EXPECT_EQ(delta.apply(topic_record("foo", kBar)).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(delta.apply(topic_record("other", kFoo)).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(delta.apply(topic_record("bar", kBar)).ok());
  EXPECT_EQ(delta.apply(topic_record("bar", uuid(3))).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_NE(delta.topic(kBar), nullptr);
  EXPECT_EQ(delta.topic(kBar)->name, "bar");
}

TEST(MetadataImage, BrokerFencing) {
  MetadataImage image = replay({broker_record(1, 10)});
  EXPECT_TRUE(image.cluster().broker(1)->fenced);

  net::UnfenceBrokerRecord unfence;
  unfence.id = 1;
  unfence.epoch = 10;
  image = replay(image, {unfence});
  EXPECT_FALSE(image.cluster().broker(1)->fenced);

  net::FenceBrokerRecord fence;
  fence.id = 1;
  fence.epoch = 10;
  image = replay(image, {fence});
  EXPECT_TRUE(image.cluster().broker(1)->fenced);

  net::BrokerRegistrationChangeRecord change;
  change.broker_id = 1;
  change.broker_epoch = 10;
  change.fenced = -1;
  image = replay(image, {change});
  EXPECT_FALSE(image.cluster().broker(1)->fenced);
  change.fenced = 0;
  change.in_controlled_shutdown = 1;
  change.log_dirs = {uuid(9), uuid(3)};
  image = replay(image, {change});
  EXPECT_FALSE(image.cluster().broker(1)->fenced);
  EXPECT_TRUE(image.cluster().broker(1)->in_controlled_shutdown);
  EXPECT_EQ(image.cluster().broker(1)->directories, (std::vector<net::Uuid>{uuid(3), uuid(9)}));
  change.fenced = 1;
  change.in_controlled_shutdown = 0;
  change.log_dirs.clear();
  image = replay(image, {change});
  EXPECT_TRUE(image.cluster().broker(1)->fenced);
  EXPECT_TRUE(image.cluster().broker(1)->in_controlled_shutdown);
  EXPECT_EQ(image.cluster().broker(1)->directories.size(), 2u);

  // Stale epochs, unknown brokers and unknown values are errors.
  MetadataDelta delta(image);
  fence.epoch = 9;
  EXPECT_EQ(delta.apply(fence).code(), absl::StatusCode::kFailedPrecondition);
  unfence.id = 2;
  EXPECT_EQ(delta.apply(unfence).code(), absl::StatusCode::kNotFound);
  change.fenced = 2;
  EXPECT_EQ(delta.apply(change).code(), absl::StatusCode::kInvalidArgument);
  change.fenced = 0;
  change.in_controlled_shutdown = -1;
  EXPECT_EQ(delta.apply(change).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(delta.build(), image);

  // A new registration replaces the old one; unregistering removes it.
  image = replay(image, {broker_record(1, 11)});
  EXPECT_EQ(image.cluster().broker(1)->epoch, 11);
  EXPECT_FALSE(image.cluster().broker(1)->in_controlled_shutdown);
  EXPECT_TRUE(image.cluster().broker(1)->directories.empty());
  net::UnregisterBrokerRecord unregister;
  unregister.broker_id = 1;
  unregister.broker_epoch = 11;
  image = replay(image, {unregister});
  EXPECT_EQ(image.cluster().broker(1), nullptr);
  EXPECT_TRUE(image.empty());
}

TEST(MetadataImage, Controllers) {
  net::RegisterControllerRecord r;
  r.controller_id = 3000;
  r.incarnation_id = uuid(1);
  r.zk_migration_ready = true;
  net::RegisterControllerRecord::ControllerEndpoint e;
  e.name = "CONTROLLER";
  e.host = "c0";
  e.port = 9093;
  r.end_points.push_back(e);
  const MetadataImage image = replay({r});
  const ControllerRegistration* c = image.cluster().controller(3000);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->zk_migration_ready);
  EXPECT_EQ(c->listeners.at("CONTROLLER").port, 9093);
}

TEST(MetadataImage, ConfigSetAndDelete) {
  MetadataImage image = replay({config_record(kConfigResourceTopic, "foo", "a", "1"),
                                config_record(kConfigResourceTopic, "foo", "b", "2"),
                                config_record(kConfigResourceTopic, "foo", "a", "3"),
                                config_record(kConfigResourceBroker, "", "c", "4")});
  const ConfigMap* foo = image.configs().find({kConfigResourceTopic, "foo"});
  ASSERT_NE(foo, nullptr);
  EXPECT_EQ(*foo, (ConfigMap{{"a", "3"}, {"b", "2"}}));
  EXPECT_EQ(*image.configs().find({kConfigResourceBroker, ""}), (ConfigMap{{"c", "4"}}));

  image = replay(image, {config_record(kConfigResourceTopic, "foo", "a", std::nullopt),
                         config_record(kConfigResourceTopic, "foo", "zz", std::nullopt)});
  EXPECT_EQ(*image.configs().find({kConfigResourceTopic, "foo"}), (ConfigMap{{"b", "2"}}));
  image = replay(image, {config_record(kConfigResourceTopic, "foo", "b", std::nullopt),
                         config_record(kConfigResourceBroker, "", "c", std::nullopt)});
  // A resource left with no configs is dropped.
  EXPECT_TRUE(image.configs().resources.empty());
  EXPECT_TRUE(image.empty());
}

TEST(MetadataImage, FeatureLevels) {
  MetadataImage image = replay({feature_record("metadata.version", 7),
                                feature_record("kraft.version", 1),
                                feature_record("group.version", 1)});
  EXPECT_EQ(image.features().metadata_version, 7);
  EXPECT_EQ(image.features().levels.size(), 2u);
  image = replay(image, {feature_record("metadata.version", 21),
                         feature_record("kraft.version", 0)});
  EXPECT_EQ(image.features().metadata_version, 21);
  EXPECT_EQ(image.features().levels, (std::map<std::string, int16_t, std::less<>>{
                                         {"group.version", 1}}));
  MetadataDelta delta(image);
  EXPECT_EQ(delta.apply(feature_record("metadata.version", 0)).code(),
            absl::StatusCode::kInvalidArgument);
  net::ZkMigrationStateRecord zk;
  zk.zk_migration_state = 3;
  EXPECT_TRUE(delta.apply(zk).ok());
  EXPECT_EQ(delta.build().features().zk_migration_state, 3);
}

TEST(MetadataImage, QuotasAclsProducerIdsScramTokens) {
  net::ClientQuotaRecord q;
  q.entity.push_back({"user", "alice", {}});
  q.entity.push_back({"client-id", std::nullopt, {}});
  q.key = "producer_byte_rate";
  q.value = 1024.5;
  net::AccessControlEntryRecord acl;
  acl.id = uuid(5);
  acl.resource_type = 2;
  acl.resource_name = "foo";
  acl.principal = "User:alice";
  acl.host = "*";
  acl.operation = 3;
  acl.permission_type = 3;
  net::ProducerIdsRecord pids;
  pids.broker_id = 1;
  pids.next_producer_id = 5000;
  net::UserScramCredentialRecord scram;
  scram.name = "alice";
  scram.mechanism = 1;
  scram.salt = io::Buffer::copy_of(std::string_view("salt"));
  scram.iterations = 4096;
  net::DelegationTokenRecord token;
  token.token_id = "t1";
  token.owner = "User:alice";
  token.renewers = {"User:bob"};

  MetadataImage image = replay({q, acl, pids, scram, token});
  const ClientQuotaEntity entity{{"client-id", std::nullopt}, {"user", "alice"}};
  EXPECT_EQ(image.client_quotas().entities.at(entity).at("producer_byte_rate"), 1024.5);
  EXPECT_EQ(image.acls().acls.at(uuid(5)).resource_name, "foo");
  EXPECT_EQ(image.producer_ids().next_producer_id, 5000);
  EXPECT_EQ(image.scram().mechanisms.at(1).at("alice").salt, "salt");
  EXPECT_EQ(image.delegation_tokens().tokens.at("t1").renewers,
            (std::vector<std::string>{"User:bob"}));

  q.remove = true;
  net::RemoveAccessControlEntryRecord remove_acl;
  remove_acl.id = uuid(5);
  net::RemoveUserScramCredentialRecord remove_scram;
  remove_scram.name = "alice";
  remove_scram.mechanism = 1;
  net::RemoveDelegationTokenRecord remove_token;
  remove_token.token_id = "t1";
  pids.next_producer_id = -1;
  image = replay(image, {q, remove_acl, remove_scram, remove_token, pids});
  EXPECT_TRUE(image.empty());
  MetadataDelta delta(image);
  EXPECT_EQ(delta.apply(remove_acl).code(), absl::StatusCode::kNotFound);
  // Removing an absent quota, credential or token is allowed, as in Kafka.
  EXPECT_TRUE(delta.apply(q).ok());
  EXPECT_TRUE(delta.apply(remove_scram).ok());
  EXPECT_TRUE(delta.apply(remove_token).ok());
}

TEST(MetadataImage, NoOpAndTransactionMarkersOnlyMoveTheProvenance) {
  const MetadataImage base = cluster_with_foo();
  const MetadataImage image = replay(base, {net::NoOpRecord{}, net::BeginTransactionRecord{},
                                            net::EndTransactionRecord{},
                                            net::AbortTransactionRecord{}});
  EXPECT_EQ(image.provenance(), (MetadataProvenance{10, 1}));
  EXPECT_EQ(image.with_provenance(base.provenance()), base);
  EXPECT_NE(image, base);
  EXPECT_NE(image.hash(), base.hash());
}

TEST(MetadataImage, BuildSharesUnchangedParts) {
  const MetadataImage base =
      replay(cluster_with_foo(), {topic_record("bar", kBar), partition_record(kBar, 0, {1}),
                                  config_record(kConfigResourceTopic, "foo", "a", "1")});
  net::PartitionChangeRecord c = change_record(kBar, 0);
  c.leader = 1;
  const MetadataImage image = replay(base, {c});
  EXPECT_EQ(&image.features(), &base.features());
  EXPECT_EQ(&image.cluster(), &base.cluster());
  EXPECT_EQ(&image.configs(), &base.configs());
  EXPECT_EQ(&image.acls(), &base.acls());
  EXPECT_NE(&image.topics(), &base.topics());
  // The topic that did not change is the same object.
  EXPECT_EQ(image.topics().topic(kFoo), base.topics().topic(kFoo));
  EXPECT_NE(image.topics().topic(kBar), base.topics().topic(kBar));

  // A copy of an image shares everything.
  const MetadataImage copy = image;
  EXPECT_EQ(&copy.topics(), &image.topics());

  const MetadataImage configs_only =
      replay(image, {config_record(kConfigResourceTopic, "bar", "a", "1")});
  EXPECT_EQ(&configs_only.topics(), &image.topics());
  EXPECT_EQ(configs_only.configs().resources.at({kConfigResourceTopic, "foo"}),
            image.configs().resources.at({kConfigResourceTopic, "foo"}));
}

TEST(MetadataImage, DeltaIsUsableAfterBuild) {
  MetadataDelta delta{MetadataImage()};
  ASSERT_TRUE(delta.apply(topic_record("foo", kFoo), 0, 1).ok());
  const MetadataImage first = delta.build();
  ASSERT_TRUE(delta.apply(partition_record(kFoo, 0, {1}), 1, 1).ok());
  const MetadataImage second = delta.build();
  EXPECT_TRUE(first.topics().topic(kFoo)->partitions.empty());
  EXPECT_EQ(second.topics().topic(kFoo)->partitions.size(), 1u);
  EXPECT_EQ(first.provenance(), (MetadataProvenance{0, 1}));
  EXPECT_EQ(second.provenance(), (MetadataProvenance{1, 1}));
}

TEST(MetadataImage, ApplyBatch) {
  MetadataDelta delta{MetadataImage()};
  const std::vector<MetadataRecord> batch = {topic_record("foo", kFoo),
                                             partition_record(kFoo, 0, {1}),
                                             partition_record(kBar, 0, {1}),
                                             partition_record(kFoo, 1, {1})};
  absl::Status s = delta.apply_batch(100, 7, batch);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("offset 102"), std::string_view::npos) << s;
  // The records before the failing one stay applied.
  EXPECT_EQ(delta.provenance(), (MetadataProvenance{101, 7}));
  const MetadataImage image = delta.build();
  EXPECT_EQ(image.topics().topic(kFoo)->partitions.size(), 1u);

  MetadataDelta again{MetadataImage()};
  std::vector<MetadataRecordAndVersion> versioned;
  for (size_t i = 0; i < 2; ++i) versioned.push_back(at_highest_version(batch[i]));
  ASSERT_TRUE(again.apply_batch(100, 7, versioned).ok());
  EXPECT_EQ(again.build(), image);
}

TEST(MetadataImage, HashSeesEveryKindOfChange) {
  const MetadataImage base = cluster_with_foo();
  std::set<uint64_t> hashes{base.hash()};
  std::set<std::string> texts{base.describe()};
  const std::vector<MetadataRecord> changes = [] {
    std::vector<MetadataRecord> out;
    net::PartitionChangeRecord isr = change_record(kFoo, 0);
    isr.isr = std::vector<int32_t>{1};
    out.push_back(isr);
    out.push_back(broker_record(4, 1));
    out.push_back(config_record(kConfigResourceTopic, "foo", "a", "1"));
    out.push_back(config_record(kConfigResourceTopic, "foo", "a", ""));
    out.push_back(config_record(kConfigResourceTopic, "foo", "a\"", ""));
    out.push_back(feature_record("metadata.version", 19));
    out.push_back(feature_record("x", 1));
    net::ProducerIdsRecord pids;
    pids.next_producer_id = 1000;
    out.push_back(pids);
    out.push_back(topic_record("bar", kBar));
    net::ClientQuotaRecord q;
    q.key = "k";
    q.value = 1.0;
    out.push_back(q);
    q.value = -0.0;
    out.push_back(q);
    q.value = 0.0;
    out.push_back(q);
    return out;
  }();
  for (const MetadataRecord& r : changes) {
    const MetadataImage image = replay(base, {r}).with_provenance(base.provenance());
    EXPECT_NE(image, base) << to_string(r);
    EXPECT_TRUE(hashes.insert(image.hash()).second) << to_string(r);
    EXPECT_TRUE(texts.insert(image.describe()).second) << to_string(r);
  }
}

TEST(MetadataImage, DescribeQuotesStrings) {
  const MetadataImage image =
      replay({config_record(kConfigResourceTopic, "a\"b\n", "k\\", "\x01")});
  const std::string text = image.describe();
  EXPECT_NE(text.find("config 2 \"a\\x22b\\x0a\" \"k\\x5c\"=\"\\x01\"\n"), std::string::npos)
      << text;
}

TEST(MetadataImage, SnapshotOfAScriptedImage) {
  net::PartitionChangeRecord c = change_record(kFoo, 1);
  c.leader = 3;
  c.eligible_leader_replicas = std::vector<int32_t>{2};
  net::BrokerRegistrationChangeRecord shutdown;
  shutdown.broker_id = 2;
  shutdown.broker_epoch = 20;
  shutdown.in_controlled_shutdown = 1;
  shutdown.fenced = -1;
  const MetadataImage image =
      replay(cluster_with_foo(), {c, shutdown, feature_record("group.version", 1),
                                  config_record(kConfigResourceTopic, "foo", "a", "1")});
  const std::vector<MetadataRecordAndVersion> records = image.to_records();
  // metadata.version comes first.
  ASSERT_FALSE(records.empty());
  ASSERT_TRUE(std::holds_alternative<net::FeatureLevelRecord>(records[0].record));
  EXPECT_EQ(std::get<net::FeatureLevelRecord>(records[0].record).name, "metadata.version");
  absl::StatusOr<MetadataImage> loaded = load_snapshot(records, image.provenance());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, image);
  EXPECT_EQ(loaded->hash(), image.hash());
  EXPECT_EQ(loaded->describe(), image.describe());

  std::vector<MetadataRecord> plain;
  for (const auto& r : records) plain.push_back(r.record);
  EXPECT_EQ(*load_snapshot(plain, image.provenance()), image);

  // A snapshot whose records do not fit fails, naming the record.
  plain.insert(plain.begin(), partition_record(kBar, 0, {1}));
  absl::StatusOr<MetadataImage> bad = load_snapshot(plain, image.provenance());
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("snapshot record 0"), std::string_view::npos);
}

// ---------------------------------------------------------------------------
// Random valid record sequences.

// What the generator needs to know to write records that apply.
struct Model {
  std::map<int32_t, int64_t> brokers;  // id -> epoch
  struct Topic {
    std::string name;
    std::map<int32_t, size_t> partitions;  // id -> replica count
  };
  std::map<net::Uuid, Topic, UuidLess> topics;
  std::set<net::Uuid, UuidLess> acls;
  uint32_t next_id = 1;

  net::Uuid new_id(uint8_t tag) {
    net::Uuid u;
    u.bytes[0] = tag;
    const uint32_t n = next_id++;
    for (int i = 0; i < 4; ++i) u.bytes[15 - i] = static_cast<uint8_t>(n >> (8 * i));
    return u;
  }
  bool name_in_use(const std::string& name) const {
    for (const auto& [id, t] : topics) {
      if (t.name == name) return true;
    }
    return false;
  }
};

// Uniform in [lo, hi] whatever the test size (inRange alone narrows the
// range at small sizes); shrinks towards lo.
int pick(int lo, int hi) { return *rc::gen::resize(100, rc::gen::inRange(lo, hi + 1)); }
bool coin() { return *rc::gen::arbitrary<bool>(); }

std::vector<int32_t> gen_ids(int max_len) {
  std::vector<int32_t> out(static_cast<size_t>(pick(0, max_len)));
  for (int32_t& x : out) x = pick(0, 5);
  return out;
}

std::optional<std::vector<int32_t>> gen_optional_ids(int max_len) {
  if (coin()) return std::nullopt;
  return gen_ids(max_len);
}

std::string one_of(std::initializer_list<const char*> choices) {
  const std::vector<std::string> v(choices.begin(), choices.end());
  return v[static_cast<size_t>(pick(0, static_cast<int>(v.size()) - 1))];
}

std::string gen_text() {
  if (pick(0, 3) == 0) return *rc::gen::container<std::string>(rc::gen::arbitrary<char>());
  return one_of({"", "a", "b", "c", "delete", "1000"});
}

std::vector<net::Uuid> gen_dirs(Model& model, size_t n) {
  std::vector<net::Uuid> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(pick(0, 3) == 0 ? kDirectoryUnassigned : model.new_id(0x40));
  }
  return out;
}

template <typename T>
const T& pick_from(const std::vector<T>& v) {
  return v[static_cast<size_t>(pick(0, static_cast<int>(v.size()) - 1))];
}

template <typename Map>
typename Map::key_type pick_key(const Map& m) {
  auto it = m.begin();
  std::advance(it, pick(0, static_cast<int>(m.size()) - 1));
  return it->first;
}

MetadataRecord gen_register_broker(Model& model) {
  net::RegisterBrokerRecord r;
  r.broker_id = pick(0, 4);
  auto it = model.brokers.find(r.broker_id);
  r.broker_epoch = (it == model.brokers.end() ? 0 : it->second) + pick(1, 3);
  model.brokers[r.broker_id] = r.broker_epoch;
  r.incarnation_id = model.new_id(0x20);
  for (int i = pick(0, 2); i > 0; --i) {
    net::RegisterBrokerRecord::BrokerEndpoint e;
    e.name = one_of({"PLAINTEXT", "SSL", "INTERNAL"});
    e.host = gen_text();
    e.port = static_cast<uint16_t>(pick(0, 65535));
    e.security_protocol = static_cast<int16_t>(pick(0, 3));
    r.end_points.push_back(e);
  }
  for (int i = pick(0, 2); i > 0; --i) {
    net::RegisterBrokerRecord::BrokerFeature f;
    f.name = one_of({"metadata.version", "kraft.version"});
    f.min_supported_version = static_cast<int16_t>(pick(0, 3));
    f.max_supported_version = static_cast<int16_t>(pick(3, 30));
    r.features.push_back(f);
  }
  r.rack = coin() ? std::nullopt : std::optional<std::string>(gen_text());
  r.fenced = coin();
  r.in_controlled_shutdown = coin();
  r.is_migrating_zk_broker = coin();
  r.log_dirs = gen_dirs(model, static_cast<size_t>(pick(0, 2)));
  return r;
}

MetadataRecord gen_partition(Model& model, const net::Uuid& topic) {
  net::PartitionRecord r;
  r.topic_id = topic;
  r.partition_id = pick(0, 3);
  r.replicas = gen_ids(4);
  if (coin()) r.directories = gen_dirs(model, r.replicas.size());
  r.isr = gen_ids(3);
  r.removing_replicas = gen_ids(1);
  r.adding_replicas = gen_ids(1);
  r.leader = pick(-1, 5);
  r.leader_recovery_state = static_cast<int8_t>(pick(0, 1));
  r.leader_epoch = pick(0, 100);
  r.partition_epoch = pick(0, 100);
  r.eligible_leader_replicas = gen_optional_ids(2);
  r.last_known_elr = gen_optional_ids(2);
  model.topics[topic].partitions[r.partition_id] = r.replicas.size();
  return r;
}

MetadataRecord gen_partition_change(Model& model, const net::Uuid& topic, int32_t partition) {
  net::PartitionChangeRecord r;
  r.topic_id = topic;
  r.partition_id = partition;
  size_t& replicas = model.topics[topic].partitions[partition];
  if (coin()) {
    r.replicas = gen_ids(4);
    replicas = r.replicas->size();
  }
  switch (pick(0, 3)) {
    case 0: r.directories = gen_dirs(model, replicas); break;
    case 1: r.directories = std::vector<net::Uuid>{}; break;
    default: break;
  }
  r.isr = gen_optional_ids(3);
  if (coin()) r.leader = pick(-1, 5);
  r.removing_replicas = gen_optional_ids(1);
  r.adding_replicas = gen_optional_ids(1);
  r.leader_recovery_state = static_cast<int8_t>(pick(-1, 1));
  r.eligible_leader_replicas = gen_optional_ids(2);
  r.last_known_elr = gen_optional_ids(2);
  return r;
}

MetadataRecord gen_record(Model& model) {
  switch (pick(0, 19)) {
    case 0:
      return gen_register_broker(model);
    case 1: {
      net::UnregisterBrokerRecord r;
      r.broker_id = pick(0, 5);
      r.broker_epoch = pick(0, 10);
      model.brokers.erase(r.broker_id);
      return r;
    }
    case 2:
    case 3: {
      if (model.brokers.empty()) return gen_register_broker(model);
      const int32_t id = pick_key(model.brokers);
      if (coin()) {
        net::FenceBrokerRecord r;
        r.id = id;
        r.epoch = model.brokers[id];
        return r;
      }
      net::UnfenceBrokerRecord r;
      r.id = id;
      r.epoch = model.brokers[id];
      return r;
    }
    case 4: {
      if (model.brokers.empty()) return gen_register_broker(model);
      net::BrokerRegistrationChangeRecord r;
      r.broker_id = pick_key(model.brokers);
      r.broker_epoch = model.brokers[r.broker_id];
      r.fenced = static_cast<int8_t>(pick(-1, 1));
      r.in_controlled_shutdown = static_cast<int8_t>(pick(0, 1));
      r.log_dirs = gen_dirs(model, static_cast<size_t>(pick(0, 2)));
      return r;
    }
    case 5: {
      net::RegisterControllerRecord r;
      r.controller_id = pick(3000, 3002);
      r.incarnation_id = model.new_id(0x21);
      r.zk_migration_ready = coin();
      if (coin()) {
        net::RegisterControllerRecord::ControllerEndpoint e;
        e.name = "CONTROLLER";
        e.host = gen_text();
        e.port = static_cast<uint16_t>(pick(0, 65535));
        r.end_points.push_back(e);
        net::RegisterControllerRecord::ControllerFeature f;
        f.name = "kraft.version";
        f.max_supported_version = 1;
        r.features.push_back(f);
      }
      return r;
    }
    case 6:
    case 7: {
      const std::string name = one_of({"t0", "t1", "t2", "t3", "t4"});
      if (model.name_in_use(name)) return net::NoOpRecord{};
      const net::Uuid id = model.new_id(0x10);
      model.topics[id].name = name;
      return topic_record(name, id);
    }
    case 8:
    case 9: {
      if (model.topics.empty()) return net::NoOpRecord{};
      return gen_partition(model, pick_key(model.topics));
    }
    case 10:
    case 11: {
      if (model.topics.empty()) return net::NoOpRecord{};
      const net::Uuid topic = pick_key(model.topics);
      const auto& partitions = model.topics[topic].partitions;
      if (partitions.empty()) return gen_partition(model, topic);
      return gen_partition_change(model, topic, pick_key(partitions));
    }
    case 12: {
      if (model.topics.empty()) return net::NoOpRecord{};
      net::RemoveTopicRecord r;
      r.topic_id = pick_key(model.topics);
      model.topics.erase(r.topic_id);
      return r;
    }
    case 13: {
      std::optional<std::string> value;
      if (coin()) value = gen_text();
      return config_record(coin() ? kConfigResourceTopic : kConfigResourceBroker,
                           one_of({"t0", "t1", "", "1"}),
                           one_of({"retention.ms", "cleanup.policy", "x"}),
                           value);
    }
    case 14: {
      if (coin()) return feature_record("metadata.version", static_cast<int16_t>(pick(1, 25)));
      if (pick(0, 4) == 0) {
        net::ZkMigrationStateRecord r;
        r.zk_migration_state = static_cast<int8_t>(pick(0, 3));
        return r;
      }
      return feature_record(one_of({"kraft.version", "group.version"}),
                            static_cast<int16_t>(pick(0, 2)));
    }
    case 15: {
      net::ClientQuotaRecord r;
      if (coin()) r.entity.push_back({"user", coin() ? std::optional<std::string>("alice")
                                                     : std::nullopt, {}});
      if (coin()) r.entity.push_back({"client-id", "app", {}});
      r.key = one_of({"producer_byte_rate", "consumer_byte_rate"});
      r.value = static_cast<double>(pick(-3, 3)) / 2.0;
      r.remove = coin();
      return r;
    }
    case 16: {
      net::ProducerIdsRecord r;
      r.broker_id = pick(0, 4);
      r.next_producer_id = pick(-1, 100000);
      return r;
    }
    case 17: {
      if (!model.acls.empty() && coin()) {
        net::RemoveAccessControlEntryRecord r;
        r.id = pick_from(std::vector<net::Uuid>(model.acls.begin(), model.acls.end()));
        model.acls.erase(r.id);
        return r;
      }
      net::AccessControlEntryRecord r;
      r.id = model.acls.empty() || coin() ? model.new_id(0x50) : *model.acls.begin();
      model.acls.insert(r.id);
      r.resource_type = static_cast<int8_t>(pick(0, 6));
      r.resource_name = gen_text();
      r.pattern_type = static_cast<int8_t>(pick(0, 4));
      r.principal = one_of({"User:alice", "User:*"});
      r.host = "*";
      r.operation = static_cast<int8_t>(pick(0, 12));
      r.permission_type = static_cast<int8_t>(pick(0, 3));
      return r;
    }
    case 18: {
      const std::string user = one_of({"alice", "bob"});
      const int8_t mechanism = static_cast<int8_t>(pick(1, 2));
      if (coin()) {
        net::RemoveUserScramCredentialRecord r;
        r.name = user;
        r.mechanism = mechanism;
        return r;
      }
      net::UserScramCredentialRecord r;
      r.name = user;
      r.mechanism = mechanism;
      r.salt = io::Buffer::copy_of(std::string_view(gen_text()));
      r.stored_key = io::Buffer::copy_of(std::string_view(gen_text()));
      r.server_key = io::Buffer::copy_of(std::string_view(gen_text()));
      r.iterations = pick(4096, 8192);
      return r;
    }
    default: {
      switch (pick(0, 5)) {
        case 0: {
          net::DelegationTokenRecord r;
          r.token_id = one_of({"t1", "t2"});
          r.owner = gen_text();
          r.requester = gen_text();
          for (int i = pick(0, 2); i > 0; --i) r.renewers.push_back(gen_text());
          r.issue_timestamp = pick(0, 1000);
          r.max_timestamp = pick(1000, 2000);
          r.expiration_timestamp = pick(1000, 2000);
          return r;
        }
        case 1: {
          net::RemoveDelegationTokenRecord r;
          r.token_id = one_of({"t1", "t2"});
          return r;
        }
        case 2: return net::BeginTransactionRecord{};
        case 3: return net::EndTransactionRecord{};
        default: return net::NoOpRecord{};
      }
    }
  }
}

std::vector<MetadataRecord> gen_records() {
  Model model;
  std::vector<MetadataRecord> out;
  const int n = pick(0, 150);
  for (int i = 0; i < n; ++i) out.push_back(gen_record(model));
  return out;
}

int32_t epoch_at(size_t i) { return static_cast<int32_t>(1 + i / 16); }

// Through the wire format and back, at the record's highest version.
MetadataRecord through_bytes(const MetadataRecord& r) {
  absl::StatusOr<io::Buffer> value = encode_metadata_record(at_highest_version(r));
  RC_ASSERT(value.ok());
  absl::StatusOr<MetadataRecordAndVersion> back = decode_metadata_record(*value);
  RC_ASSERT(back.ok());
  RC_ASSERT(back->record == r);
  return back->record;
}

MetadataImage replay_all(const std::vector<MetadataRecord>& records) {
  MetadataDelta delta{MetadataImage()};
  for (size_t i = 0; i < records.size(); ++i) {
    const absl::Status s = delta.apply(records[i], static_cast<int64_t>(i), epoch_at(i));
    if (!s.ok()) RC_FAIL(std::string(s.message()) + "\n" + to_string(records[i]));
  }
  return delta.build();
}

// One delta for the whole sequence, or image -> delta -> image -> ... at
// random cuts (with every record through its bytes): the same image.
RC_GTEST_PROP(MetadataImageProperty, SplitDeltasGiveTheSameImage, ()) {
  const std::vector<MetadataRecord> records = gen_records();
  const MetadataImage whole = replay_all(records);

  MetadataImage image;
  size_t i = 0;
  while (i < records.size()) {
    const size_t n = *rc::gen::inRange<size_t>(1, std::min<size_t>(records.size() - i, 12) + 1);
    MetadataDelta delta(image);
    if (*rc::gen::arbitrary<bool>()) {
      std::vector<MetadataRecord> batch;
      for (size_t j = i; j < i + n; ++j) batch.push_back(through_bytes(records[j]));
      // One batch per leader epoch.
      for (size_t j = 0; j < batch.size();) {
        size_t k = j;
        while (k < batch.size() && epoch_at(i + k) == epoch_at(i + j)) ++k;
        RC_ASSERT(delta
                      .apply_batch(static_cast<int64_t>(i + j), epoch_at(i + j),
                                   std::span<const MetadataRecord>(batch).subspan(j, k - j))
                      .ok());
        j = k;
      }
    } else {
      for (size_t j = i; j < i + n; ++j) {
        RC_ASSERT(
            delta.apply(through_bytes(records[j]), static_cast<int64_t>(j), epoch_at(j)).ok());
      }
    }
    image = delta.build();
    i += n;
  }
  RC_ASSERT(image == whole);
  RC_ASSERT(image.hash() == whole.hash());
  RC_ASSERT(image.describe() == whole.describe());
  if (!records.empty()) {
    RC_ASSERT(whole.provenance() ==
              (MetadataProvenance{static_cast<int64_t>(records.size()) - 1,
                                  epoch_at(records.size() - 1)}));
  }
}

// The records of an image's snapshot, through their bytes, replayed into the
// empty image: the same image, and the same snapshot again.
RC_GTEST_PROP(MetadataImageProperty, SnapshotRoundTrip, ()) {
  const MetadataImage image = replay_all(gen_records());
  const std::vector<MetadataRecordAndVersion> records = image.to_records();
  std::vector<MetadataRecordAndVersion> decoded;
  for (const MetadataRecordAndVersion& r : records) {
    absl::StatusOr<io::Buffer> value = encode_metadata_record(r);
    RC_ASSERT(value.ok());
    absl::StatusOr<MetadataRecordAndVersion> back = decode_metadata_record(*value);
    RC_ASSERT(back.ok());
    decoded.push_back(*std::move(back));
  }
  absl::StatusOr<MetadataImage> loaded = load_snapshot(decoded, image.provenance());
  RC_ASSERT(loaded.ok());
  RC_ASSERT(*loaded == image);
  RC_ASSERT(loaded->hash() == image.hash());
  RC_ASSERT(loaded->describe() == image.describe());
  RC_ASSERT(loaded->to_records() == records);
  RC_ASSERT(image.empty() == records.empty());
}

// Equality, describe() and hash() agree on every prefix of a sequence.
RC_GTEST_PROP(MetadataImageProperty, EqualityDescribeAndHashAgree, ()) {
  const std::vector<MetadataRecord> records = gen_records();
  MetadataDelta delta{MetadataImage()};
  MetadataImage previous;
  for (const MetadataRecord& r : records) {
    RC_ASSERT(delta.apply(r).ok());
    const MetadataImage image = delta.build();
    const bool same_text = image.describe() == previous.describe();
    RC_ASSERT((image == previous) == same_text);
    RC_ASSERT((image.hash() == previous.hash()) == same_text);
    previous = image;
  }
}

}  // namespace
}  // namespace brook::metadata
