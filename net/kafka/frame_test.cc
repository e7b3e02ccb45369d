// net/kafka/frame_test.cc: framing, request headers, ApiVersions rules.
#include "net/kafka/frame.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "net/kafka/apis.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/api_versions_request.h"
#include "net/kafka/messages/metadata_request.h"
#include "net/kafka/messages/metadata_response.h"
#include "net/kafka/messages/produce_request.h"

namespace brook::net {
namespace {

io::Buffer bytes(std::string_view s) { return io::Buffer::copy_of(s); }
std::string str(const char* s, size_t n) { return std::string(s, n); }

TEST(FrameReader, ReassemblesFramesFromAnyPieces) {
  const std::string stream = str("\0\0\0\3abc\0\0\0\0\0\0\0\2xy", 17);
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    FrameReader reader;
    std::vector<std::string> frames;
    for (size_t i = 0; i < stream.size(); i += piece) {
      reader.feed(bytes(stream.substr(i, piece)));
      for (;;) {
        auto next = reader.next();
        ASSERT_TRUE(next.ok());
        if (!next->has_value()) break;
        frames.emplace_back((*next)->view());
      }
    }
    EXPECT_EQ(frames, (std::vector<std::string>{"abc", "", "xy"})) << "piece " << piece;
    EXPECT_EQ(reader.buffered(), 0u);
  }
}

TEST(FrameReader, RejectsNegativeAndOversizedLengthsBeforeBuffering) {
  FrameReader reader(1024);
  reader.feed(bytes(str("\xff\xff\xff\xfe", 4)));
  EXPECT_FALSE(reader.next().ok());
  FrameReader small(1024);
  small.feed(bytes(str("\0\0\x04\x01", 4)));  // 1025 bytes
  auto next = small.next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kResourceExhausted);
  FrameReader exact(1024);
  exact.feed(bytes(str("\0\0\x04\x00", 4)));
  auto pending = exact.next();
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(pending->has_value());
}

// kafka-python 2.0.2's first request: ApiVersions v0, header v1.
TEST(ParseRequest, ApiVersionsV0) {
  const io::Buffer frame = bytes(str("\0\x12\0\0\0\0\0\x01\0\x0c" "kafka-python", 22));
  auto parsed = parse_request(frame);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->problem, RequestProblem::kNone);
  EXPECT_EQ(parsed->frame.header_version, 1);
  EXPECT_EQ(parsed->frame.header.request_api_key, 18);
  EXPECT_EQ(parsed->frame.header.correlation_id, 1);
  EXPECT_EQ(parsed->frame.header.client_id, "kafka-python");
  EXPECT_TRUE(decode_body<ApiVersionsRequest>(parsed->frame).ok());
}

// librdkafka's ApiVersions v3: header v2 with a non-compact client id.
TEST(ParseRequest, ApiVersionsV3) {
  const std::string raw = str("\0\x12\0\x03\0\0\0\x02\0\x07rdkafka\0", 18) +
                          str("\x0b" "librdkafka\x06" "2.0.2\0", 18);
  auto parsed = parse_request(bytes(raw));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->frame.header_version, 2);
  EXPECT_EQ(parsed->frame.header.client_id, "rdkafka");
  auto body = decode_body<ApiVersionsRequest>(parsed->frame);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(body->client_software_name, "librdkafka");
  EXPECT_EQ(body->client_software_version, "2.0.2");
}

TEST(ParseRequest, UnknownKeysAndVersionsAreErrors) {
  EXPECT_FALSE(parse_request(bytes(str("\0\x63\0\0\0\0\0\x01\0\0", 10))).ok());  // key 99
  EXPECT_FALSE(parse_request(bytes(str("\0\0\0\x0c\0\0\0\x01\0\0", 10))).ok());  // Produce v12
  EXPECT_FALSE(parse_request(bytes(str("\0\x12\xff\xff\0\0\0\x01\0\0", 10))).ok());
  EXPECT_FALSE(parse_request(bytes(str("\0\x12\0", 3))).ok());
  // A header cut short in its client id.
  EXPECT_FALSE(parse_request(bytes(str("\0\x12\0\0\0\0\0\x01\0\x05" "ab", 12))).ok());
}

TEST(ParseRequest, NewerApiVersionsIsFlaggedNotRejected) {
  const std::string raw = str("\0\x12\0\x09\0\0\0\x07\0\x01x\0", 12) + str("\x02z\x02" "1\0", 5);
  auto parsed = parse_request(bytes(raw));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->problem, RequestProblem::kUnsupportedApiVersionsVersion);
  EXPECT_EQ(parsed->frame.header.correlation_id, 7);
}

ApiVersionsResponse supported() {
  const ApiSupport implemented[] = {{18, 0, 3}, {3, 0, 12}, {0, 0, 11}, {52, 0, 1}, {1, 4, 99}};
  return make_api_versions_response(implemented, kListenerBroker);
}

TEST(ApiVersionsTable, ClampedToSchemasAndListener) {
  const ApiVersionsResponse r = supported();
  ASSERT_EQ(r.api_keys.size(), 4u);  // Vote (52) is controller-only
  EXPECT_EQ(r.api_keys[0].api_key, 0);
  EXPECT_EQ(r.api_keys[1].api_key, 1);
  EXPECT_EQ(r.api_keys[1].min_version, 4);
  EXPECT_EQ(r.api_keys[1].max_version, find_api(1)->max_version);
  EXPECT_EQ(r.api_keys[3].api_key, 18);
}

TEST(ApiVersionsTable, AdvertisedFloorBelowTheServedOne) {
  const ApiSupport implemented[] = {{0, 3, 11, 0}, {1, 4, 17}};
  const ApiVersionsResponse r = make_api_versions_response(implemented, kListenerBroker);
  ASSERT_EQ(r.api_keys.size(), 2u);
  EXPECT_EQ(r.api_keys[0].min_version, 0);  // listed from v0...
  EXPECT_EQ(r.api_keys[0].max_version, 11);
  EXPECT_EQ(r.api_keys[1].min_version, 4);
  // Never above the served floor, whatever is asked.
  const ApiSupport higher[] = {{0, 3, 11, 5}};
  EXPECT_EQ(make_api_versions_response(higher, kListenerBroker).api_keys[0].min_version, 3);
}

TEST(ApiVersionsCheck, ClientSoftwareLabels) {
  auto valid = [](std::string name, std::string version) {
    ApiVersionsRequest r;
    r.client_software_name = std::move(name);
    r.client_software_version = std::move(version);
    return valid_client_software(r);
  };
  EXPECT_TRUE(valid("librdkafka", "2.0.2"));
  EXPECT_TRUE(valid("confluent-kafka-python", "1.7.0-rdkafka-2.0.2"));
  EXPECT_TRUE(valid("a", "1"));
  EXPECT_FALSE(valid("", "1"));
  EXPECT_FALSE(valid("bad name", "1"));
  EXPECT_FALSE(valid("-lead", "1"));
  EXPECT_FALSE(valid("trail.", "1"));
  EXPECT_FALSE(valid("ok", "1_0"));
  const ApiVersionsResponse invalid = api_versions_invalid_request();
  EXPECT_EQ(invalid.error_code, code(Error::kInvalidRequest));
  EXPECT_TRUE(invalid.api_keys.empty());
}

TEST(EncodeResponse, ApiVersionsHeaderIsAlwaysV0) {
  RequestHeader request;
  request.request_api_key = 18;
  request.request_api_version = 3;
  request.correlation_id = 0x01020304;
  auto frame = encode_response(supported(), request);
  ASSERT_TRUE(frame.ok());
  const std::string out = frame->to_string();
  // Size, correlation id, then the body's error code: no tag byte between.
  EXPECT_EQ(out.substr(4, 6), str("\x01\x02\x03\x04\0\0", 6));
  auto back = decode_response<ApiVersionsResponse>(io::Buffer::copy_of(out.substr(4)), 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, supported());
}

TEST(EncodeResponse, FlexibleResponsesCarryAHeaderTagSection) {
  RequestHeader request;
  request.request_api_key = 3;
  request.request_api_version = 9;
  request.correlation_id = 5;
  MetadataResponse body;
  auto frame = encode_response(body, request);
  ASSERT_TRUE(frame.ok());
  const std::string out = frame->to_string();
  EXPECT_EQ(out.substr(4, 5), str("\0\0\0\x05\0", 5));
  int32_t correlation = 0;
  auto back =
      decode_response<MetadataResponse>(io::Buffer::copy_of(out.substr(4)), 9, &correlation);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(correlation, 5);
}

TEST(EncodeResponse, UnsupportedApiVersionsAnswer) {
  RequestHeader request;
  request.request_api_key = 18;
  request.request_api_version = 9;
  request.correlation_id = 11;
  auto frame = encode_api_versions_fallback(supported(), request);
  ASSERT_TRUE(frame.ok());
  const std::string out = frame->to_string();
  // v0: correlation id, error 35, one entry (key 18, 0..3).
  EXPECT_EQ(out, str("\0\0\0\x10\0\0\0\x0b\0\x23\0\0\0\x01\0\x12\0\0\0\x03", 20));
  EXPECT_EQ(error_name(35), "UNSUPPORTED_VERSION");
  EXPECT_TRUE(error_retriable(code(Error::kNotLeaderOrFollower)));
  EXPECT_FALSE(error_retriable(code(Error::kTopicAlreadyExists)));
  EXPECT_EQ(error_name(9999), "UNKNOWN_ERROR_CODE");
}

// The one answer brokers and controllers give: by version and labels.
TEST(AnswerApiVersions, ByVersionAndClientSoftware) {
  auto answer = [](int16_t version, const ApiVersionsRequest& body) -> ApiVersionsResponse {
    auto request = encode_request(body, std::min<int16_t>(version, ApiVersionsRequest::kHighestVersion), 3,
                                  std::string("client"));
    EXPECT_TRUE(request.ok());
    const io::Buffer bytes = request->linearize();
    auto parsed = parse_request(bytes.slice(4, bytes.size() - 4));
    EXPECT_TRUE(parsed.ok());
    RequestFrame frame = parsed->frame;
    frame.header.request_api_version = version;
    auto out = answer_api_versions(supported(), frame);
    EXPECT_TRUE(out.ok()) << out.status();
    const io::Buffer reply = out->linearize();
    // The fallback is always v0, whatever was asked.
    const int16_t decode_as = version > ApiVersionsRequest::kHighestVersion ? 0 : version;
    auto back = decode_response<ApiVersionsResponse>(reply.slice(4, reply.size() - 4), decode_as);
    EXPECT_TRUE(back.ok()) << back.status();
    return back.value_or(ApiVersionsResponse{});
  };
  ApiVersionsRequest unnamed;
  ApiVersionsRequest named;
  named.client_software_name = "librdkafka";
  named.client_software_version = "2.0.2";
  EXPECT_EQ(answer(0, unnamed), supported());
  EXPECT_EQ(answer(2, unnamed), supported());  // labels are v3+
  EXPECT_EQ(answer(3, named), supported());
  EXPECT_EQ(answer(ApiVersionsRequest::kHighestVersion, named), supported());
  const ApiVersionsResponse refused = answer(3, unnamed);
  EXPECT_EQ(refused.error_code, code(Error::kInvalidRequest));
  EXPECT_TRUE(refused.api_keys.empty());
  const ApiVersionsResponse unknown = answer(ApiVersionsRequest::kHighestVersion + 5, named);
  EXPECT_EQ(unknown.error_code, code(Error::kUnsupportedVersion));
  ASSERT_EQ(unknown.api_keys.size(), 1u);
  EXPECT_EQ(unknown.api_keys[0].api_key, ApiVersionsRequest::kApiKey);
  // A v3 body that does not decode is an error: the connection closes.
  RequestFrame truncated;
  truncated.header.request_api_key = ApiVersionsRequest::kApiKey;
  truncated.header.request_api_version = 3;
  truncated.body = io::Buffer::copy_of(std::string("\x05" "ab", 3));
  EXPECT_FALSE(answer_api_versions(supported(), truncated).ok());
}

TEST(EncodeRequest, RoundTripsThroughTheServerParser) {
  MetadataRequest body;
  body.topics.emplace().emplace_back().name = "orders";
  for (int16_t v : {1, 4, 9, 12}) {
    auto frame = encode_request(body, v, 42, std::string("client"));
    ASSERT_TRUE(frame.ok()) << frame.status();
    FrameReader reader;
    reader.feed(frame->linearize());
    auto next = reader.next();
    ASSERT_TRUE(next.ok() && next->has_value());
    auto parsed = parse_request(**next);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->frame.header.correlation_id, 42);
    EXPECT_EQ(parsed->frame.header.client_id, "client");
    auto back = decode_body<MetadataRequest>(parsed->frame);
    ASSERT_TRUE(back.ok()) << back.status();
    if (v >= 10) body.topics->front().topic_id = {};
    EXPECT_EQ(back->topics->front().name, "orders");
  }
}

}  // namespace
}  // namespace brook::net
