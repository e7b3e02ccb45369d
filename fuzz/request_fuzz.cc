// fuzz/request_fuzz.cc: fuzz_request.
//
// Input: a request frame without its 4-byte size, as a server reads it.
// parse_request reads the header; the body is decoded as the request type of
// the header's API key and version (every key, through visit_api). Whatever
// decodes, header and body, must survive the round-trip oracle.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "net/kafka/apis.h"
#include "net/kafka/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brook;
  const io::Buffer frame = io::Buffer::copy_of(fuzz::as_bytes(data, size));
  absl::StatusOr<net::ParsedRequest> parsed = net::parse_request(frame);
  if (!parsed.ok()) return 0;
  const net::RequestFrame& request = parsed->frame;
  fuzz::check_round_trip(request.header, request.header_version);
  // An ApiVersions request at a version this code does not know is answered
  // without reading its body (KIP-511).
  if (parsed->problem != net::RequestProblem::kNone) return 0;
  net::visit_api(
      request.header.request_api_key,
      [&](auto request_type, auto /*response_type*/) {
        using Request = typename decltype(request_type)::type;
        absl::StatusOr<Request> body = net::decode_body<Request>(request);
        if (body.ok()) fuzz::check_round_trip(*body, request.header.request_api_version);
        return 0;
      },
      [] {
        // parse_request accepted the key, so it has a schema.
        BROOK_UNREACHABLE();
        return 0;
      });
  return 0;
}
