// net/kafka/frame.h
//
// Kafka framing: every request and response is a 4-byte big-endian size and
// that many bytes. A request frame starts with a request header (v0: key,
// version, correlation id; v1 adds the client id; v2 adds tagged fields); a
// response frame starts with a response header (v0: correlation id; v1 adds
// tagged fields). Which header version goes with which (key, version) is
// decided by the API's flexible versions (net/kafka/apis.h), except that
// ApiVersions responses always use header v0 so that a client can read them
// whatever version it asked for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "net/kafka/message.h"
#include "net/kafka/messages/api_versions_request.h"
#include "net/kafka/messages/api_versions_response.h"
#include "net/kafka/messages/request_header.h"
#include "net/kafka/messages/response_header.h"

namespace brook::net {

// socket.request.max.bytes: Kafka's default largest request.
inline constexpr int32_t kDefaultMaxRequestBytes = 100 * 1024 * 1024;

// Splits a byte stream into frames. Bytes arrive in arbitrary pieces; each
// complete frame comes out as one contiguous Buffer (without its size).
class FrameReader {
 public:
  explicit FrameReader(int32_t max_frame_bytes = kDefaultMaxRequestBytes)
      : max_frame_bytes_(max_frame_bytes) {}

  void feed(io::Buffer bytes) { pending_.append(std::move(bytes)); }
  // Changes the largest frame accepted from the next one on.
  void set_max_frame_bytes(int32_t max_frame_bytes) { max_frame_bytes_ = max_frame_bytes; }

  // The next complete frame, std::nullopt when more bytes are needed, or an
  // error for a negative or oversized length (the connection should close;
  // nothing is allocated for such a frame).
  absl::StatusOr<std::optional<io::Buffer>> next();

  // Bytes received and not yet returned as a frame.
  size_t buffered() const { return pending_.size(); }

 private:
  int32_t max_frame_bytes_;
  io::BufferChain pending_;
};

// A request frame whose header has been read.
struct RequestFrame {
  RequestHeader header;
  int16_t header_version = 1;
  // The body: the frame after the header.
  io::Buffer body;
  // The client's address as Kafka reports it in group descriptions
  // ("/127.0.0.1"); empty when not read from a connection.
  std::string client_host;
  // The name of the listener the request came in on (listeners), whose
  // advertised addresses the answer gives; empty when not read from a
  // connection, or the server does not say.
  std::string listener_name;
};

// What a server makes of a request frame.
enum class RequestProblem {
  kNone,
  // ApiVersions at a version this code does not know: answer with
  // UNSUPPORTED_VERSION in the v0 body format (see api_versions_fallback).
  kUnsupportedApiVersionsVersion,
};

struct ParsedRequest {
  RequestFrame frame;
  RequestProblem problem = RequestProblem::kNone;
};

// Reads the request header of a frame. An unknown API key, a version outside
// the schema's range (other than ApiVersions, see RequestProblem), or a
// malformed header is an error: Kafka closes such connections.
absl::StatusOr<ParsedRequest> parse_request(const io::Buffer& frame);

// Decodes a request body as message type M at the header's version.
template <Message M>
absl::StatusOr<M> decode_body(const RequestFrame& request) {
  return decode<M>(request.body, request.header.request_api_version);
}

// A request frame, size prefix included, ready to write to a socket.
template <Message M>
absl::StatusOr<io::BufferChain> encode_request(const M& body, int16_t version,
                                               int32_t correlation_id,
                                               const std::optional<std::string>& client_id);

// A response frame for a request, size prefix included.
template <Message M>
absl::StatusOr<io::BufferChain> encode_response(const M& body, const RequestHeader& request);

// Client side: a response frame's correlation id (the first 4 bytes).
absl::StatusOr<int32_t> peek_correlation_id(const io::Buffer& frame);

// Client side: decodes a response frame to a request of (key, version).
template <Message M>
absl::StatusOr<M> decode_response(const io::Buffer& frame, int16_t version,
                                  int32_t* correlation_id = nullptr);

// A server's ApiVersions answer: for each API it implements, the implemented
// range clamped to the schema's range. APIs not served on the listener kind
// (kListenerBroker, kListenerController) or without a schema are left out.
// advertised_min_version, when set, lowers the advertised floor below the
// served one; the server must still refuse the versions between.
struct ApiSupport {
  int16_t key;
  int16_t min_version;
  int16_t max_version;
  int16_t advertised_min_version = -1;
};
ApiVersionsResponse make_api_versions_response(std::span<const ApiSupport> implemented,
                                               uint8_t listener);

// The ApiVersions response for a version the server does not know (KIP-511):
// error UNSUPPORTED_VERSION, listing the ApiVersions versions supported, so
// the client can retry with one of them.
ApiVersionsResponse api_versions_fallback(const ApiVersionsResponse& supported);
// ...and its frame: always v0 body and header, whatever version was asked.
absl::StatusOr<io::BufferChain> encode_api_versions_fallback(const ApiVersionsResponse& supported,
                                                             const RequestHeader& request);

// KIP-511: an ApiVersions v3+ request's client software name and version
// must each match Kafka's pattern [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?;
// a server answers one that does not with api_versions_invalid_request():
// INVALID_REQUEST and no API list.
bool valid_client_software(const ApiVersionsRequest& request);
ApiVersionsResponse api_versions_invalid_request();

// A server's answer to an ApiVersions request, given what it supports: the
// KIP-511 fallback for a version this code does not know, INVALID_REQUEST
// for v3+ with malformed client software labels, else `supported` (fields a
// version lacks, like v3's features, are left out by the encoder). Brokers
// and controllers answer through this one function.
absl::StatusOr<io::BufferChain> answer_api_versions(const ApiVersionsResponse& supported,
                                                    const RequestFrame& request);

// --- implementation -------------------------------------------------------

namespace detail {
int16_t request_header_version_for(int16_t key, int16_t version);
int16_t response_header_version_for(int16_t key, int16_t version);
io::Buffer size_prefix(size_t size);
}  // namespace detail

template <Message M>
absl::StatusOr<io::BufferChain> encode_request(const M& body, int16_t version,
                                               int32_t correlation_id,
                                               const std::optional<std::string>& client_id) {
  RequestHeader header;
  header.request_api_key = M::kApiKey;
  header.request_api_version = version;
  header.correlation_id = correlation_id;
  header.client_id = client_id;
  const int16_t header_version = detail::request_header_version_for(M::kApiKey, version);
  io::BufferChain out;
  io::BufferChain head;
  if (absl::Status s = encode_to(header, header_version, &head); !s.ok()) return s;
  io::BufferChain payload;
  if (absl::Status s = encode_to(body, version, &payload); !s.ok()) return s;
  out.append(detail::size_prefix(head.size() + payload.size()));
  out.append(std::move(head));
  out.append(std::move(payload));
  return out;
}

template <Message M>
absl::StatusOr<io::BufferChain> encode_response(const M& body, const RequestHeader& request) {
  ResponseHeader header;
  header.correlation_id = request.correlation_id;
  const int16_t version = request.request_api_version;
  const int16_t header_version = detail::response_header_version_for(M::kApiKey, version);
  io::BufferChain head;
  if (absl::Status s = encode_to(header, header_version, &head); !s.ok()) return s;
  io::BufferChain payload;
  if (absl::Status s = encode_to(body, version, &payload); !s.ok()) return s;
  io::BufferChain out;
  out.append(detail::size_prefix(head.size() + payload.size()));
  out.append(std::move(head));
  out.append(std::move(payload));
  return out;
}

template <Message M>
absl::StatusOr<M> decode_response(const io::Buffer& frame, int16_t version,
                                  int32_t* correlation_id) {
  Reader r(frame);
  ResponseHeader header;
  const int16_t header_version = detail::response_header_version_for(M::kApiKey, version);
  if (absl::Status s = decode_from(r, header_version, &header); !s.ok()) return s;
  if (correlation_id != nullptr) *correlation_id = header.correlation_id;
  return decode<M>(frame.slice(r.position()), version);
}

}  // namespace brook::net
