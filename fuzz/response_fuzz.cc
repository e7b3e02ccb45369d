// fuzz/response_fuzz.cc: fuzz_response.
//
// Input: 4 selector bytes choosing an API key and version (fuzz_support.h),
// then a response frame without its size: the response header, then the
// body, decoded as that API's response type as a client would. Whatever
// decodes must survive the round-trip oracle.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_support.h"
#include "net/kafka/apis.h"
#include "net/kafka/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brook;
  if (size < fuzz::kResponseSelectorBytes) return 0;
  const fuzz::ResponseSelection selected = fuzz::select_response(data);
  const io::Buffer frame = io::Buffer::copy_of(
      fuzz::as_bytes(data + fuzz::kResponseSelectorBytes, size - fuzz::kResponseSelectorBytes));
  const int16_t key = selected.api->key;
  const int16_t version = selected.version;

  // The header alone, as decode_response reads it.
  net::Reader r(frame);
  net::ResponseHeader header;
  const int16_t header_version = net::response_header_version(key, version);
  if (!net::decode_from(r, header_version, &header).ok()) return 0;
  fuzz::check_round_trip(header, header_version);

  net::visit_api(
      key,
      [&](auto /*request_type*/, auto response_type) {
        using Response = typename decltype(response_type)::type;
        int32_t correlation_id = 0;
        absl::StatusOr<Response> body =
            net::decode_response<Response>(frame, version, &correlation_id);
        if (!body.ok()) return 0;
        BROOK_ASSERT_EQ(correlation_id, header.correlation_id);
        fuzz::check_round_trip(*body, version);
        return 0;
      },
      [] {
        BROOK_UNREACHABLE();  // all_apis() lists only keys with schemas
        return 0;
      });
  return 0;
}
