// net/kafka/versioned.h
//
// Messages framed with their version: a big-endian int16, then the
// message at that version. This is how Kafka writes the keys and values
// of __consumer_offsets records and the consumer protocol's subscription
// and assignment bytes.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "net/kafka/message.h"

namespace brook::net {

template <Message M>
absl::StatusOr<io::Buffer> encode_versioned(const M& m, int16_t version) {
  io::BufferChain body;
  absl::Status status = encode_to(m, version, &body);
  if (!status.ok()) return status;
  io::Buffer out = io::Buffer::allocate(2 + body.size());
  std::byte* p = out.mutable_data();
  p[0] = static_cast<std::byte>(static_cast<uint16_t>(version) >> 8);
  p[1] = static_cast<std::byte>(static_cast<uint16_t>(version) & 0xff);
  body.copy_to(0, {p + 2, body.size()});
  return out;
}

// The version a framed message starts with.
inline absl::StatusOr<int16_t> versioned_version(const io::Buffer& b) {
  if (b.size() < 2) return absl::InvalidArgumentError("a versioned message shorter than its version");
  const std::byte* p = b.data();
  return static_cast<int16_t>((static_cast<uint16_t>(p[0]) << 8) | static_cast<uint16_t>(p[1]));
}

// Decodes a framed message at the version it names. With `tolerant`, a
// version above M's highest is read as the highest one and trailing bytes
// are allowed (Kafka's ConsumerProtocol reads newer clients' metadata so).
template <Message M>
absl::StatusOr<M> decode_versioned(const io::Buffer& b, bool tolerant = false) {
  absl::StatusOr<int16_t> version = versioned_version(b);
  if (!version.ok()) return version.status();
  int16_t v = *version;
  if (tolerant && v > M::kHighestVersion) v = M::kHighestVersion;
  if (!tolerant) return decode<M>(b.slice(2), v);
  const io::Buffer body = b.slice(2);
  Reader r(body);
  M m;
  absl::Status status = decode_from(r, v, &m);
  if (!status.ok()) return status;
  return m;
}

}  // namespace brook::net
