// net/kafka/frame.cc
#include "net/kafka/frame.h"

#include <fmt/format.h>

#include <algorithm>

#include "net/kafka/apis.h"
#include "net/kafka/errors.h"

namespace brook::net {

absl::StatusOr<std::optional<io::Buffer>> FrameReader::next() {
  if (pending_.size() < 4) return std::optional<io::Buffer>();
  std::byte prefix[4];
  pending_.copy_to(0, prefix);
  const auto size = static_cast<int32_t>((static_cast<uint32_t>(prefix[0]) << 24) |
                                         (static_cast<uint32_t>(prefix[1]) << 16) |
                                         (static_cast<uint32_t>(prefix[2]) << 8) |
                                         static_cast<uint32_t>(prefix[3]));
  if (size < 0) {
    return absl::InvalidArgumentError(fmt::format("negative frame size {}", size));
  }
  if (size > max_frame_bytes_) {
    return absl::ResourceExhaustedError(fmt::format(
        "frame of {} bytes is larger than the limit of {} bytes", size, max_frame_bytes_));
  }
  const size_t total = 4 + static_cast<size_t>(size);
  if (pending_.size() < total) return std::optional<io::Buffer>();
  io::Buffer frame = pending_.slice(4, static_cast<size_t>(size)).linearize();
  pending_.consume(total);
  return std::optional<io::Buffer>(std::move(frame));
}

namespace detail {

int16_t request_header_version_for(int16_t key, int16_t version) {
  return request_header_version(key, version);
}

int16_t response_header_version_for(int16_t key, int16_t version) {
  return response_header_version(key, version);
}

io::Buffer size_prefix(size_t size) {
  io::Buffer b = io::Buffer::allocate(4);
  const auto n = static_cast<uint32_t>(size);
  std::byte* p = b.mutable_data();
  p[0] = static_cast<std::byte>(n >> 24);
  p[1] = static_cast<std::byte>(n >> 16);
  p[2] = static_cast<std::byte>(n >> 8);
  p[3] = static_cast<std::byte>(n);
  return b;
}

}  // namespace detail

absl::StatusOr<ParsedRequest> parse_request(const io::Buffer& frame) {
  Reader peek(frame);
  const int16_t key = peek.i16();
  const int16_t version = peek.i16();
  if (!peek.ok()) return absl::InvalidArgumentError("request frame shorter than its header");
  const ApiInfo* api = find_api(key);
  if (api == nullptr) {
    return absl::InvalidArgumentError(fmt::format("unknown API key {}", key));
  }
  ParsedRequest parsed;
  if (version < api->min_version || version > api->max_version) {
    if (key != static_cast<int16_t>(ApiKey::kApiVersions) || version < 0) {
      return absl::InvalidArgumentError(fmt::format(
          "unsupported version {} of {} (versions {}-{})", version, api->name, api->min_version,
          api->max_version));
    }
    // A newer client's ApiVersions: its header follows the flexible rule.
    parsed.problem = RequestProblem::kUnsupportedApiVersionsVersion;
  }
  const int16_t header_version = request_header_version(key, version);
  Reader r(frame);
  parsed.frame.header_version = header_version;
  if (absl::Status s = decode_from(r, header_version, &parsed.frame.header); !s.ok()) {
    return s;
  }
  parsed.frame.body = frame.slice(r.position());
  return parsed;
}

absl::StatusOr<int32_t> peek_correlation_id(const io::Buffer& frame) {
  Reader r(frame);
  const int32_t id = r.i32();
  if (!r.ok()) return absl::InvalidArgumentError("response frame shorter than its header");
  return id;
}

ApiVersionsResponse make_api_versions_response(std::span<const ApiSupport> implemented,
                                               uint8_t listener) {
  ApiVersionsResponse out;
  for (const ApiSupport& support : implemented) {
    const ApiInfo* api = find_api(support.key);
    if (api == nullptr || (api->listeners & listener) == 0) continue;
    const int16_t lo = std::max(support.min_version, api->min_version);
    const int16_t hi = std::min(support.max_version, api->max_version);
    if (lo > hi) continue;
    auto& entry = out.api_keys.emplace_back();
    entry.api_key = support.key;
    entry.min_version = support.advertised_min_version >= 0
                            ? std::min(lo, support.advertised_min_version)
                            : lo;
    entry.max_version = hi;
  }
  std::sort(out.api_keys.begin(), out.api_keys.end(),
            [](const auto& a, const auto& b) { return a.api_key < b.api_key; });
  return out;
}

absl::StatusOr<io::BufferChain> encode_api_versions_fallback(const ApiVersionsResponse& supported,
                                                             const RequestHeader& request) {
  RequestHeader v0 = request;
  v0.request_api_version = 0;
  return encode_response(api_versions_fallback(supported), v0);
}

namespace {

bool valid_software_label(std::string_view s) {
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (s.empty() || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alnum(c) || c == '-' || c == '.'; });
}

}  // namespace

bool valid_client_software(const ApiVersionsRequest& request) {
  return valid_software_label(request.client_software_name) &&
         valid_software_label(request.client_software_version);
}

ApiVersionsResponse api_versions_invalid_request() {
  ApiVersionsResponse out;
  out.error_code = static_cast<int16_t>(Error::kInvalidRequest);
  return out;
}

absl::StatusOr<io::BufferChain> answer_api_versions(const ApiVersionsResponse& supported,
                                                    const RequestFrame& request) {
  const int16_t version = request.header.request_api_version;
  if (version > ApiVersionsRequest::kHighestVersion) {
    return encode_api_versions_fallback(supported, request.header);
  }
  if (version >= 3) {
    absl::StatusOr<ApiVersionsRequest> decoded = decode_body<ApiVersionsRequest>(request);
    if (!decoded.ok()) return decoded.status();
    if (!valid_client_software(*decoded)) return encode_response(api_versions_invalid_request(), request.header);
  }
  return encode_response(supported, request.header);
}

ApiVersionsResponse api_versions_fallback(const ApiVersionsResponse& supported) {
  ApiVersionsResponse out;
  out.error_code = static_cast<int16_t>(Error::kUnsupportedVersion);
  for (const auto& entry : supported.api_keys) {
    if (entry.api_key == static_cast<int16_t>(ApiKey::kApiVersions)) out.api_keys.push_back(entry);
  }
  return out;
}

}  // namespace brook::net
