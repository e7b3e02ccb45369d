// net/kafka/message.h
//
// Encoding and decoding any generated Kafka message (net/kafka/messages.h):
//
//   absl::StatusOr<io::BufferChain> bytes = encode(request, version);
//   absl::StatusOr<ProduceRequest> back = decode<ProduceRequest>(frame, version);
//
// encode() sizes the message exactly, fills one allocation and splices
// `records` payloads in without copying them. decode() reads the whole of a
// contiguous buffer; `bytes` and `records` fields come back as slices of it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "net/kafka/wire.h"

namespace brook::net {

// Generated top-level messages: they know their version range.
template <typename M>
concept Message = requires(const M& m, Sizer& s, Writer& w, std::string& out) {
  M::kName;
  M::kLowestVersion;
  M::kHighestVersion;
  m.measure(s, int16_t{0});
  m.write(w, int16_t{0});
  m.append_to(out);
};

template <typename M>
bool version_supported(int16_t version) {
  return version >= M::kLowestVersion && version <= M::kHighestVersion;
}

// The exact encoded size (including records). REQUIRES: supported version.
template <Message M>
size_t encoded_size(const M& m, int16_t version) {
  Sizer s;
  m.measure(s, version);
  return s.bytes;
}

template <Message M>
absl::Status encode_to(const M& m, int16_t version, io::BufferChain* out) {
  if (!version_supported<M>(version)) {
    return absl::InvalidArgumentError(
        fmt::format("{} has no version {} (versions {}-{})", M::kName, version, M::kLowestVersion,
                    M::kHighestVersion));
  }
  Sizer s;
  m.measure(s, version);
  Writer w(s);
  m.write(w, version);
  absl::Status status = w.finish(out);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{} v{}: {}", M::kName, version, std::string(status.message())));
  }
  return status;
}

template <Message M>
absl::StatusOr<io::BufferChain> encode(const M& m, int16_t version) {
  io::BufferChain out;
  absl::Status status = encode_to(m, version, &out);
  if (!status.ok()) return status;
  return out;
}

// Reads one message from r at version; the caller decides whether bytes may
// follow it.
template <Message M>
absl::Status decode_from(Reader& r, int16_t version, M* m) {
  if (!version_supported<M>(version)) {
    return absl::InvalidArgumentError(
        fmt::format("{} has no version {} (versions {}-{})", M::kName, version, M::kLowestVersion,
                    M::kHighestVersion));
  }
  m->read(r, version);
  if (!r.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{} v{}: {}", M::kName, version, std::string(r.status().message())));
  }
  return absl::OkStatus();
}

// Decodes all of `bytes`; trailing bytes are an error.
template <Message M>
absl::StatusOr<M> decode(const io::Buffer& bytes, int16_t version) {
  Reader r(bytes);
  M m;
  absl::Status status = decode_from(r, version, &m);
  if (!status.ok()) return status;
  if (r.remaining() != 0) {
    return absl::InvalidArgumentError(fmt::format("{} v{}: {} unexpected bytes after the message",
                                                  M::kName, version, r.remaining()));
  }
  return m;
}

template <typename T>
  requires requires(const T& t, std::string& s) { t.append_to(s); }
std::string to_string(const T& m) {
  std::string out;
  m.append_to(out);
  return out;
}

}  // namespace brook::net

// fmt::format("{}", message) for every generated struct.
template <typename T>
  requires requires(const T& t, std::string& s) { t.append_to(s); }
struct fmt::formatter<T> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(const T& m, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(brook::net::to_string(m), ctx);
  }
};
