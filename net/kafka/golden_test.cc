// net/kafka/golden_test.cc: request frames captured from real clients
// (kcat/librdkafka 2.0.2, kafka-python 2.0.2; scripts/capture-golden.sh)
// decode to the fields those clients sent and re-encode byte for byte.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "net/kafka/apis.h"
#include "net/codec/compression.h"
#include "net/kafka/frame.h"
#include "net/kafka/record_batch.h"

namespace brook::net {
namespace {

const std::filesystem::path kGolden = std::filesystem::path(BROOK_SOURCE_DIR) / "net/kafka/testdata/golden";

std::map<std::string, io::Buffer> load_all() {
  std::map<std::string, io::Buffer> frames;
  for (const auto& entry : std::filesystem::directory_iterator(kGolden)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    frames.emplace(entry.path().stem().string(), io::Buffer::copy_of(bytes));
  }
  return frames;
}

const std::map<std::string, io::Buffer>& golden() {
  static const auto* frames = new std::map<std::string, io::Buffer>(load_all());
  return *frames;
}

// Decodes a golden frame's body as M.
template <typename M>
M body(const std::string& name) {
  auto it = golden().find(name);
  EXPECT_NE(it, golden().end()) << name;
  if (it == golden().end()) return M{};
  auto parsed = parse_request(it->second);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return M{};
  EXPECT_EQ(parsed->frame.header.request_api_key, M::kApiKey);
  auto decoded = decode_body<M>(parsed->frame);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return decoded.ok() ? *decoded : M{};
}

TEST(Golden, EveryCaptureDecodesAndReencodesIdentically) {
  ASSERT_GE(golden().size(), 50u);
  for (const auto& entry : golden()) {
    const std::string& name = entry.first;
    const io::Buffer& frame = entry.second;
    auto parsed = parse_request(frame);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    const RequestHeader& h = parsed->frame.header;
    EXPECT_NE(name.find(fmt::format("-{}-v{}", find_api(h.request_api_key)->name,
                                    h.request_api_version)),
              std::string::npos)
        << name;
    const std::string reencoded = visit_api(
        h.request_api_key,
        [&](auto req, auto) -> std::string {
          using Req = typename decltype(req)::type;
          auto decoded = decode_body<Req>(parsed->frame);
          EXPECT_TRUE(decoded.ok()) << name << ": " << decoded.status();
          if (!decoded.ok()) return {};
          auto head = encode(h, parsed->frame.header_version);
          auto payload = encode(*decoded, h.request_api_version);
          EXPECT_TRUE(head.ok() && payload.ok()) << name;
          if (!head.ok() || !payload.ok()) return {};
          return head->to_string() + payload->to_string();
        },
        [] { return std::string(); });
    EXPECT_TRUE(reencoded == std::string(frame.view())) << name << " does not re-encode identically";
  }
}

TEST(Golden, LibrdkafkaFields) {
  const auto versions = body<ApiVersionsRequest>("kcat-none-ApiVersions-v3");
  EXPECT_EQ(versions.client_software_name, "librdkafka");
  EXPECT_EQ(versions.client_software_version, "2.0.2");

  const auto produce = body<ProduceRequest>("kcat-idempotent-Produce-v7");
  EXPECT_EQ(produce.acks, -1);  // idempotence forces acks=all
  EXPECT_FALSE(produce.transactional_id.has_value());
  ASSERT_EQ(produce.topic_data.size(), 1u);
  EXPECT_EQ(produce.topic_data[0].name, "golden");
  ASSERT_EQ(produce.topic_data[0].partition_data.size(), 1u);
  ASSERT_TRUE(produce.topic_data[0].partition_data[0].records.has_value());
  // A v2 record batch: magic byte 2 at offset 16.
  const io::Buffer& records = *produce.topic_data[0].partition_data[0].records;
  ASSERT_GT(records.size(), 61u);
  EXPECT_EQ(static_cast<int>(records.data()[16]), 2);

  const auto fetch = body<FetchRequest>("kcat-consumer-Fetch-v11");
  EXPECT_EQ(fetch.replica_id, -1);
  EXPECT_EQ(fetch.isolation_level, 1);  // librdkafka reads committed by default
  EXPECT_EQ(fetch.session_epoch, -1);
  ASSERT_EQ(fetch.topics.size(), 1u);
  EXPECT_EQ(fetch.topics[0].topic, "golden");
  EXPECT_EQ(fetch.topics[0].partitions[0].partition_max_bytes, 1048576);

  const auto join = body<JoinGroupRequest>("kcat-group-JoinGroup-v5");
  EXPECT_EQ(join.group_id, "golden-group");
  EXPECT_EQ(join.member_id, "");
  EXPECT_EQ(join.protocol_type, "consumer");
  ASSERT_EQ(join.protocols.size(), 2u);
  EXPECT_EQ(join.protocols[0].name, "range");
  EXPECT_EQ(join.protocols[1].name, "roundrobin");

  const auto offsets = body<OffsetFetchRequest>("kcat-group-OffsetFetch-v7");
  EXPECT_EQ(offsets.group_id, "golden-group");
  EXPECT_TRUE(offsets.require_stable);

  const auto coordinator = body<FindCoordinatorRequest>("confluent-txn-FindCoordinator-v2");
  EXPECT_EQ(coordinator.key, "golden-txn");
  EXPECT_EQ(coordinator.key_type, 1);  // transaction coordinator

  const auto init = body<InitProducerIdRequest>("confluent-txn-InitProducerId-v4");
  EXPECT_EQ(init.transactional_id, "golden-txn");
  EXPECT_EQ(init.transaction_timeout_ms, 60000);
  EXPECT_EQ(init.producer_id, -1);
  EXPECT_EQ(init.producer_epoch, -1);
}

TEST(Golden, KafkaPythonFields) {
  const auto produce = body<ProduceRequest>("kafka-python-producer-Produce-v7");
  EXPECT_EQ(produce.acks, 1);
  EXPECT_EQ(produce.timeout_ms, 30000);
  ASSERT_EQ(produce.topic_data.size(), 1u);
  EXPECT_EQ(produce.topic_data[0].name, "golden");

  const auto fetch = body<FetchRequest>("kafka-python-consumer-Fetch-v4");
  EXPECT_EQ(fetch.isolation_level, 0);
  EXPECT_EQ(fetch.max_wait_ms, 500);
  EXPECT_EQ(fetch.topics[0].partitions[0].fetch_offset, 0);

  const auto join = body<JoinGroupRequest>("kafka-python-consumer-JoinGroup-v2");
  EXPECT_EQ(join.group_id, "kp-group");
  EXPECT_EQ(join.session_timeout_ms, 10000);
  EXPECT_EQ(join.rebalance_timeout_ms, 300000);

  const auto commit = body<OffsetCommitRequest>("kafka-python-consumer-OffsetCommit-v2");
  EXPECT_EQ(commit.group_id, "kp-group");
  EXPECT_EQ(commit.generation_id_or_member_epoch, 1);
  ASSERT_EQ(commit.topics.size(), 1u);
  EXPECT_EQ(commit.topics[0].partitions[0].committed_offset, 1);

  const auto coordinator = body<FindCoordinatorRequest>("kafka-python-consumer-FindCoordinator-v0");
  EXPECT_EQ(coordinator.key, "kp-group");

  const auto create = body<CreateTopicsRequest>("kafka-python-admin-CreateTopics-v3");
  ASSERT_EQ(create.topics.size(), 1u);
  EXPECT_EQ(create.topics[0].name, "golden-admin");
  EXPECT_EQ(create.topics[0].num_partitions, 3);
  EXPECT_EQ(create.topics[0].replication_factor, 1);

  // kafka-python sends ApiVersions v0: header v1, empty body.
  auto parsed = parse_request(golden().at("kafka-python-producer-ApiVersions-v0"));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->frame.header_version, 1);
  EXPECT_EQ(parsed->frame.body.size(), 0u);
}

// The one record batch of a captured Produce request, checked and decoded.
struct ProducedBatch {
  RecordBatchHeader header;
  std::vector<Record> records;
};
ProducedBatch produced_batch(const std::string& name) {
  const auto produce = body<ProduceRequest>(name);
  EXPECT_EQ(produce.topic_data.size(), 1u);
  if (produce.topic_data.empty() || produce.topic_data[0].partition_data.empty()) return {};
  const auto& records = produce.topic_data[0].partition_data[0].records;
  EXPECT_TRUE(records.has_value());
  if (!records) return {};
  BatchIterator it(*records, {.crc = CrcCheck::kVerify, .partial = PartialBatch::kReject});
  auto batch = it.next();
  EXPECT_TRUE(batch.ok()) << name << ": " << batch.status();
  if (!batch.ok() || !batch->has_value()) return {};
  auto after = it.next();
  EXPECT_TRUE(after.ok() && !after->has_value()) << name << ": more than one batch";
  auto decoded = decode_records((*batch)->bytes, 1 << 20);
  EXPECT_TRUE(decoded.ok()) << name << ": " << decoded.status();
  if (!decoded.ok()) return {};
  return {(*batch)->header, *decoded};
}

std::string text(const std::optional<io::Buffer>& b) { return b ? std::string(b->view()) : "null"; }

// Batches librdkafka compressed with each codec decode to what kcat sent.
TEST(Golden, LibrdkafkaBatchesInEveryCodec) {
  const std::pair<const char*, codec::Compression> codecs[] = {
      {"gzip", codec::Compression::kGzip},
      {"snappy", codec::Compression::kSnappy},
      {"lz4", codec::Compression::kLz4},
      {"zstd", codec::Compression::kZstd}};
  for (const auto& [name, compression] : codecs) {
    const ProducedBatch batch = produced_batch(fmt::format("kcat-{}-Produce-v7", name));
    EXPECT_EQ(batch.header.compression(), compression) << name;
    ASSERT_EQ(batch.records.size(), 2u) << name;
    EXPECT_EQ(text(batch.records[0].key), fmt::format("key-{}", name));
    EXPECT_EQ(text(batch.records[0].value),
              fmt::format("value-{}-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", name));
    EXPECT_EQ(text(batch.records[1].value), fmt::format("value-{}-bbbbbbbbbbbbbbbbbbbbbbbb", name));
    EXPECT_EQ(batch.records[1].offset_delta, 1);
  }
  const ProducedBatch plain = produced_batch("kcat-none-Produce-v7");
  EXPECT_EQ(plain.header.compression(), codec::Compression::kNone);
  ASSERT_EQ(plain.records.size(), 2u);
  EXPECT_EQ(text(plain.records[0].key), "k1");
  EXPECT_EQ(text(plain.records[1].value), "v2");
}

TEST(Golden, IdempotentAndKafkaPythonBatches) {
  const ProducedBatch idempotent = produced_batch("kcat-idempotent-Produce-v7");
  EXPECT_EQ(idempotent.header.producer_id, 1000);  // from InitProducerId
  EXPECT_EQ(idempotent.header.producer_epoch, 0);
  EXPECT_EQ(idempotent.header.base_sequence, 0);
  ASSERT_EQ(idempotent.records.size(), 1u);
  EXPECT_EQ(text(idempotent.records[0].key), "idem");

  const ProducedBatch python = produced_batch("kafka-python-producer-Produce-v7");
  EXPECT_EQ(python.header.producer_id, -1);
  ASSERT_EQ(python.records.size(), 1u);
  EXPECT_EQ(text(python.records[0].key), "kp-key");
  EXPECT_EQ(text(python.records[0].value), "kp-value");
  ASSERT_EQ(python.records[0].headers.size(), 1u);
  EXPECT_EQ(python.records[0].headers[0].key, "h");
  EXPECT_EQ(text(python.records[0].headers[0].value), "1");
}

// Every strict prefix of a real frame is rejected cleanly.
TEST(Golden, TruncatedCapturesAreRejected) {
  for (const auto& [name, frame] : golden()) {
    for (size_t n = 0; n < frame.size(); ++n) {
      const io::Buffer prefix = io::Buffer::copy_of(frame.span().first(n));
      auto parsed = parse_request(prefix);
      if (!parsed.ok()) continue;
      const bool decoded = visit_api(
          parsed->frame.header.request_api_key,
          [&](auto req, auto) {
            return decode_body<typename decltype(req)::type>(parsed->frame).ok();
          },
          [] { return false; });
      EXPECT_FALSE(decoded) << name << " prefix " << n;
    }
  }
}

}  // namespace
}  // namespace brook::net
