#include "core/metadata/record_serde.h"

#include <fmt/format.h>

#include <cstddef>
#include <limits>
#include <utility>

#include "net/codec/varint.h"
#include "net/kafka/message.h"
#include "net/kafka/wire.h"

namespace brook::metadata {
namespace {

constexpr size_t kRecordTypes = std::variant_size_v<MetadataRecord>;

// Decodes the body of the record type with `key` at index I or later.
template <size_t I = 0>
absl::StatusOr<MetadataRecord> decode_body(int16_t key, int16_t version, net::Reader& r) {
  if constexpr (I == kRecordTypes) {
    return absl::InvalidArgumentError(fmt::format("unknown metadata record api key {}", key));
  } else {
    using M = std::variant_alternative_t<I, MetadataRecord>;
    if (M::kApiKey != key) return decode_body<I + 1>(key, version, r);
    M m;
    absl::Status status = net::decode_from(r, version, &m);
    if (!status.ok()) return status;
    if (r.remaining() != 0) {
      return absl::InvalidArgumentError(fmt::format("{} v{}: {} unexpected bytes after the record",
                                                    M::kName, version, r.remaining()));
    }
    return MetadataRecord(std::in_place_index<I>, std::move(m));
  }
}

template <size_t I = 0>
std::optional<std::string_view> name_of_key(int16_t key) {
  if constexpr (I == kRecordTypes) {
    return std::nullopt;
  } else {
    using M = std::variant_alternative_t<I, MetadataRecord>;
    if (M::kApiKey == key) return M::kName;
    return name_of_key<I + 1>(key);
  }
}

}  // namespace

int16_t api_key(const MetadataRecord& record) {
  return std::visit([](const auto& m) -> int16_t { return std::decay_t<decltype(m)>::kApiKey; },
                    record);
}

std::string_view record_name(const MetadataRecord& record) {
  return std::visit(
      [](const auto& m) -> std::string_view { return std::decay_t<decltype(m)>::kName; }, record);
}

int16_t lowest_version(const MetadataRecord& record) {
  return std::visit(
      [](const auto& m) -> int16_t { return std::decay_t<decltype(m)>::kLowestVersion; }, record);
}

int16_t highest_version(const MetadataRecord& record) {
  return std::visit(
      [](const auto& m) -> int16_t { return std::decay_t<decltype(m)>::kHighestVersion; }, record);
}

std::optional<std::string_view> record_name(int16_t key) { return name_of_key(key); }

MetadataRecordAndVersion at_highest_version(MetadataRecord record) {
  const int16_t version = highest_version(record);
  return MetadataRecordAndVersion{std::move(record), version};
}

absl::StatusOr<io::Buffer> encode_metadata_record(const MetadataRecord& record, int16_t version) {
  io::BufferChain body;
  absl::Status status =
      std::visit([&](const auto& m) { return net::encode_to(m, version, &body); }, record);
  if (!status.ok()) return status;

  const uint32_t key = static_cast<uint32_t>(api_key(record));
  const uint32_t v = static_cast<uint32_t>(version);
  const size_t header = codec::size_of_unsigned_varint(kMetadataFrameVersion) +
                        codec::size_of_unsigned_varint(key) + codec::size_of_unsigned_varint(v);
  io::Buffer out = io::Buffer::allocate(header + body.size());
  std::byte* p = out.mutable_data();
  p += codec::encode_unsigned_varint(kMetadataFrameVersion, p);
  p += codec::encode_unsigned_varint(key, p);
  p += codec::encode_unsigned_varint(v, p);
  body.copy_to(0, {p, body.size()});
  return out;
}

absl::StatusOr<io::Buffer> encode_metadata_record(const MetadataRecordAndVersion& record) {
  return encode_metadata_record(record.record, record.version);
}

absl::StatusOr<MetadataRecordAndVersion> decode_metadata_record(const io::Buffer& value) {
  net::Reader r(value);
  const uint32_t frame_version = r.uvarint();
  if (!r.ok()) return absl::InvalidArgumentError("metadata record: truncated frame version");
  if (frame_version != kMetadataFrameVersion) {
    return absl::InvalidArgumentError(
        fmt::format("metadata record: unknown frame version {} (expected {})", frame_version,
                    kMetadataFrameVersion));
  }
  const uint32_t key = r.uvarint();
  if (!r.ok()) return absl::InvalidArgumentError("metadata record: truncated api key");
  const uint32_t version = r.uvarint();
  if (!r.ok()) return absl::InvalidArgumentError("metadata record: truncated version");
  constexpr uint32_t kMax = std::numeric_limits<int16_t>::max();
  if (key > kMax) {
    return absl::InvalidArgumentError(fmt::format("unknown metadata record api key {}", key));
  }
  if (version > kMax) {
    return absl::InvalidArgumentError(
        fmt::format("metadata record api key {}: version {} out of range", key, version));
  }
  absl::StatusOr<MetadataRecord> record =
      decode_body(static_cast<int16_t>(key), static_cast<int16_t>(version), r);
  if (!record.ok()) return record.status();
  return MetadataRecordAndVersion{*std::move(record), static_cast<int16_t>(version)};
}

std::string to_string(const MetadataRecord& record) {
  return std::visit([](const auto& m) { return net::to_string(m); }, record);
}

std::string to_string(const MetadataRecordAndVersion& record) {
  return fmt::format("v{} {}", record.version, to_string(record.record));
}

}  // namespace brook::metadata
