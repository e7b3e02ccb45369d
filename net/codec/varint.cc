// net/codec/varint.cc
//
// The cold half of varint decoding: turning a failed read into a Status.
#include "net/codec/varint.h"

#include <fmt/format.h>

namespace brook::codec {

absl::Status varint_error(std::span<const std::byte> in, size_t bytes_max) {
  // read_* fails only when every byte it may look at has the continuation
  // bit: either the input ran out first, or the type's byte limit did.
  if (in.size() < bytes_max) {
    return absl::OutOfRangeError(
        fmt::format("varint truncated: {} byte(s), all with the continuation bit", in.size()));
  }
  return absl::InvalidArgumentError(
      fmt::format("varint too long: more than {} bytes for a {}-bit value", bytes_max,
                  bytes_max == kVarint32BytesMax ? 32 : 64));
}

}  // namespace brook::codec
