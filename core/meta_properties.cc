// core/meta_properties.cc
#include "core/meta_properties.h"

#include <array>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "io/assert.h"
#include "io/buffer.h"
#include "io/status.h"
#include "storage/checkpoint.h"

namespace brook::core {

namespace {

constexpr std::string_view kVersionKey = "version";
constexpr std::string_view kClusterIdKey = "cluster.id";
constexpr std::string_view kNodeIdKey = "node.id";
constexpr std::string_view kBrokerIdKey = "broker.id";
constexpr std::string_view kDirectoryIdKey = "directory.id";
// Kafka's second line is the date Properties.store writes.
constexpr std::string_view kHeader = "#\n#Written by brook\n";

using UuidBytes = std::array<uint8_t, 16>;

absl::Status malformed(int64_t line_number, std::string_view what) {
  return absl::DataLossError(fmt::format("line {}: {}", line_number, what));
}

std::string quoted(std::string_view text) {
  constexpr size_t kQuotedBytesMax = 80;
  if (text.size() <= kQuotedBytesMax) return fmt::format("'{}'", text);
  return fmt::format("'{}...'", text.substr(0, kQuotedBytesMax));
}

// Properties.load's whitespace, plus the '\r' of a "\r\n" line end.
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\r'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
  return text;
}

// A character Properties.store would escape, or one a value must not hold.
bool needs_escape(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x21 || u > 0x7e || c == '\\' || c == '=' || c == ':' || c == '#' || c == '!';
}

uint64_t high_bits(const net::Uuid& id) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | id.bytes[i];
  return v;
}

uint64_t low_bits(const net::Uuid& id) {
  uint64_t v = 0;
  for (size_t i = 8; i < 16; ++i) v = (v << 8) | id.bytes[i];
  return v;
}

// A directory as messages show it: "." for the Disk's root.
std::string shown(std::string_view dir) {
  return dir.empty() ? std::string(".") : std::string(dir);
}

struct Property {
  std::string value;
  int64_t line_number = 0;
};
using Properties = std::map<std::string, Property>;

// Splits the text into properties (see the header comment for the grammar).
absl::StatusOr<Properties> parse_properties(std::string_view text) {
  Properties props;
  int64_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t end = text.find('\n');
    const std::string_view raw = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == '!') continue;
    if (line.find('\\') != std::string_view::npos) {
      return malformed(line_number,
                       fmt::format("backslash escapes are not supported: {}", quoted(line)));
    }
    const size_t separator = line.find_first_of("=:");
    if (separator == std::string_view::npos) {
      return malformed(line_number,
                       fmt::format("expected 'key=value' or 'key:value', got {}", quoted(line)));
    }
    const std::string_view key = trim(line.substr(0, separator));
    const std::string_view value = trim(line.substr(separator + 1));
    if (key.empty()) return malformed(line_number, fmt::format("empty key in {}", quoted(line)));
    for (char c : key) {
      if (is_blank(c)) {
        return malformed(line_number, fmt::format("whitespace in key {}", quoted(key)));
      }
    }
    const auto [it, inserted] =
        props.emplace(std::string(key), Property{std::string(value), line_number});
    if (!inserted) {
      return malformed(line_number, fmt::format("{} given twice (first on line {})", key,
                                                it->second.line_number));
    }
  }
  return props;
}

const Property* find(const Properties& props, std::string_view key) {
  const auto it = props.find(std::string(key));
  return it == props.end() ? nullptr : &it->second;
}

absl::Status validate_for_writing(const MetaProperties& meta) {
  if (meta.version != kMetaPropertiesVersion0 && meta.version != kMetaPropertiesVersion1) {
    return absl::InvalidArgumentError(
        fmt::format("unknown meta.properties version {} (expected 0 or 1)", meta.version));
  }
  if (!is_valid_cluster_id(meta.cluster_id)) {
    return absl::InvalidArgumentError(
        fmt::format("Cluster ID string {} does not appear to be a valid UUID", meta.cluster_id));
  }
  if (meta.node_id < 0) {
    return absl::InvalidArgumentError(
        fmt::format("The node id must be a non-negative integer, not {}", meta.node_id));
  }
  if (meta.directory_id.has_value() && is_reserved_directory_id(*meta.directory_id)) {
    return absl::InvalidArgumentError(
        fmt::format("reserved directory id {}", meta.directory_id->to_string()));
  }
  return absl::OkStatus();
}

// Creates `dir` and each missing parent, and makes each name durable.
io::Task<absl::Status> make_dirs(io::Disk& disk, std::string dir) {
  CO_RETURN_IF_ERROR(io::validate_disk_path(dir));
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i != dir.size() && dir[i] != '/') continue;
    const std::string prefix = dir.substr(0, i);
    CO_RETURN_IF_ERROR(storage::annotate_with_path(co_await disk.make_dir(prefix), prefix));
    const std::string parent = storage::parent_dir(prefix);
    CO_RETURN_IF_ERROR(storage::annotate_with_path(co_await disk.sync_dir(parent), shown(parent)));
  }
  co_return absl::OkStatus();
}

}  // namespace

std::string to_string(const MetaProperties& meta) {
  std::string out = fmt::format("MetaProperties(version={}, clusterId={}, nodeId={}", meta.version,
                                meta.cluster_id, meta.node_id);
  if (meta.directory_id.has_value()) out += ", directoryId=" + meta.directory_id->to_string();
  out += ")";
  return out;
}

std::string meta_properties_path(std::string_view dir) {
  if (dir.empty()) return std::string(kMetaPropertiesFileName);
  return fmt::format("{}/{}", dir, kMetaPropertiesFileName);
}

// --- Identifiers -------------------------------------------------------------

bool is_valid_cluster_id(std::string_view text) {
  if (text.size() != storage::kUuidTextBytes) return false;
  for (char c : text) {
    const bool base64url = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                           (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!base64url) return false;
  }
  return true;
}

std::string random_cluster_id(io::Random& random) { return random_uuid(random).to_string(); }

bool is_reserved_directory_id(const net::Uuid& id) {
  return high_bits(id) == 0 && static_cast<int64_t>(low_bits(id)) < 100;
}

net::Uuid random_directory_id(io::Random& random) {
  while (true) {
    const net::Uuid id = random_uuid(random);
    if (!is_reserved_directory_id(id)) return id;
  }
}

// --- The file's text ---------------------------------------------------------

std::string encode_meta_properties(const MetaProperties& meta) {
  BROOK_ASSERT(meta.version == kMetaPropertiesVersion0 || meta.version == kMetaPropertiesVersion1);
  BROOK_ASSERT(!meta.cluster_id.empty());
  for (char c : meta.cluster_id) {
    BROOK_ASSERT_MSG(!needs_escape(c), "cluster id '{}'", meta.cluster_id);
  }
  BROOK_ASSERT_GE(meta.node_id, 0);
  // Sorted by key.
  std::map<std::string_view, std::string> props;
  props.emplace(kVersionKey, fmt::format("{}", meta.version));
  props.emplace(kClusterIdKey, meta.cluster_id);
  props.emplace(meta.version == kMetaPropertiesVersion0 ? kBrokerIdKey : kNodeIdKey,
                fmt::format("{}", meta.node_id));
  if (meta.directory_id.has_value()) props.emplace(kDirectoryIdKey, meta.directory_id->to_string());
  std::string text(kHeader);
  for (const auto& [key, value] : props) text += fmt::format("{}={}\n", key, value);
  return text;
}

absl::StatusOr<MetaProperties> decode_meta_properties(std::string_view text) {
  ASSIGN_OR_RETURN(const Properties props, parse_properties(text));
  if (props.empty()) return absl::DataLossError("no properties (empty file)");
  MetaProperties meta;
  // Kafka: a missing version is version 0.
  meta.version = kMetaPropertiesVersion0;
  if (const Property* p = find(props, kVersionKey)) {
    const std::optional<int32_t> version = storage::parse_decimal_int32(p->value);
    if (!version.has_value() ||
        (*version != kMetaPropertiesVersion0 && *version != kMetaPropertiesVersion1)) {
      return malformed(p->line_number,
                       fmt::format("unknown version {} (expected 0 or 1)", quoted(p->value)));
    }
    meta.version = *version;
  }
  const std::string_view node_key =
      meta.version == kMetaPropertiesVersion0 ? kBrokerIdKey : kNodeIdKey;
  const Property* node = find(props, node_key);
  if (node == nullptr) {
    return absl::DataLossError(
        fmt::format("{} was not found (version {})", node_key, meta.version));
  }
  const std::optional<int32_t> node_id = storage::parse_decimal_int32(node->value);
  if (!node_id.has_value() || *node_id < 0) {
    return malformed(node->line_number, fmt::format("bad {} {}", node_key, quoted(node->value)));
  }
  meta.node_id = *node_id;
  const Property* cluster = find(props, kClusterIdKey);
  if (cluster == nullptr) return absl::DataLossError("cluster.id was not found");
  if (cluster->value.empty()) return malformed(cluster->line_number, "empty cluster.id");
  meta.cluster_id = cluster->value;
  if (const Property* p = find(props, kDirectoryIdKey)) {
    const std::optional<net::Uuid> id = storage::parse_uuid(p->value);
    if (!id.has_value()) {
      return malformed(
          p->line_number,
          fmt::format("bad directory.id {} (expected a 22-character Uuid)", quoted(p->value)));
    }
    meta.directory_id = *id;
  }
  return meta;
}

// --- Directories ---------------------------------------------------------------

io::Task<absl::StatusOr<std::optional<MetaProperties>>> read_meta_properties(io::Disk& disk,
                                                                             std::string dir) {
  const std::string path = meta_properties_path(dir);
  CO_ASSIGN_OR_RETURN(std::optional<io::Buffer> bytes,
                      co_await storage::read_whole_file_agreed(disk, path));
  if (!bytes.has_value()) co_return std::optional<MetaProperties>();
  absl::StatusOr<MetaProperties> meta = decode_meta_properties(bytes->view());
  if (!meta.ok()) co_return storage::annotate_with_path(meta.status(), path);
  co_return std::optional<MetaProperties>(std::move(*meta));
}

io::Task<absl::Status> format_directory(io::Disk& disk, std::string dir, MetaProperties meta,
                                        io::Random& random, bool ignore_formatted) {
  CO_RETURN_IF_ERROR(validate_for_writing(meta));
  CO_RETURN_IF_ERROR(io::validate_disk_path(dir));
  const std::string path = meta_properties_path(dir);
  CO_ASSIGN_OR_RETURN(std::optional<io::Buffer> existing,
                      co_await storage::read_whole_file_agreed(disk, path));
  if (existing.has_value()) {
    if (ignore_formatted) co_return absl::OkStatus();
    absl::StatusOr<MetaProperties> stored = decode_meta_properties(existing->view());
    if (!stored.ok()) co_return storage::annotate_with_path(stored.status(), path);
    MetaProperties compared = *stored;
    if (!meta.directory_id.has_value()) compared.directory_id.reset();
    if (compared == meta) co_return absl::OkStatus();
    co_return absl::AlreadyExistsError(
        fmt::format("already formatted: {} holds {}. Use --ignore-formatted to leave a formatted "
                    "directory as it is.",
                    path, to_string(*stored)));
  }
  CO_RETURN_IF_ERROR(co_await make_dirs(disk, dir));
  if (!meta.directory_id.has_value()) meta.directory_id = random_directory_id(random);
  io::Buffer bytes = io::Buffer::copy_of(encode_meta_properties(meta));
  CO_RETURN_IF_ERROR(co_await storage::write_file_atomically(disk, path, std::move(bytes)));
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<MetaProperties>> ensure_formatted(io::Disk& disk,
                                                          std::vector<std::string> dirs,
                                                          std::string cluster_id, int32_t node_id,
                                                          bool format_if_missing,
                                                          io::Random& random) {
  if (dirs.empty()) co_return absl::InvalidArgumentError("no log directories");
  if (node_id < 0) {
    co_return absl::InvalidArgumentError(
        fmt::format("The node id must be a non-negative integer, not {}", node_id));
  }
  if (!cluster_id.empty() && !is_valid_cluster_id(cluster_id)) {
    co_return absl::InvalidArgumentError(
        fmt::format("Cluster ID string {} does not appear to be a valid UUID", cluster_id));
  }
  const std::set<std::string> sorted(dirs.begin(), dirs.end());
  std::map<std::string, MetaProperties> stored;
  std::vector<std::string> missing;
  for (const std::string& dir : sorted) {
    CO_ASSIGN_OR_RETURN(std::optional<MetaProperties> meta,
                        co_await read_meta_properties(disk, dir));
    if (meta.has_value()) {
      stored.emplace(dir, std::move(*meta));
    } else {
      missing.push_back(dir);
    }
  }

  std::string expected_cluster_id = cluster_id;
  std::map<UuidBytes, std::string> directory_ids;  // id -> its directory
  for (const auto& [dir, meta] : stored) {
    const std::string path = meta_properties_path(dir);
    if (expected_cluster_id.empty()) {
      expected_cluster_id = meta.cluster_id;
    } else if (meta.cluster_id != expected_cluster_id) {
      co_return absl::FailedPreconditionError(
          fmt::format("Invalid cluster.id in: {}. Expected {}, but read {}", path,
                      expected_cluster_id, meta.cluster_id));
    }
    if (meta.node_id != node_id) {
      co_return absl::FailedPreconditionError(fmt::format(
          "Stored node id {} doesn't match previous node id {} in {}. If you moved your data, "
          "make sure your configured node id matches. If you intend to create a new node, you "
          "should remove all data in your data directories.",
          meta.node_id, node_id, path));
    }
    if (meta.directory_id.has_value()) {
      const std::string id = meta.directory_id->to_string();
      if (is_reserved_directory_id(*meta.directory_id)) {
        co_return absl::FailedPreconditionError(
            fmt::format("Invalid reserved directory ID {} found in {}", id, shown(dir)));
      }
      const auto [it, inserted] = directory_ids.emplace(meta.directory_id->bytes, dir);
      if (!inserted) {
        co_return absl::FailedPreconditionError(
            fmt::format("Duplicate directory ID {} found. It was the ID of {}, but also of {}", id,
                        shown(it->second), shown(dir)));
      }
    }
  }

  if (!missing.empty()) {
    if (!format_if_missing) {
      co_return absl::FailedPreconditionError(fmt::format(
          "No meta.properties found in {} (have you run `brook format`?)", shown(missing.front())));
    }
    if (expected_cluster_id.empty()) expected_cluster_id = random_cluster_id(random);
    for (const std::string& dir : missing) {
      net::Uuid id = random_directory_id(random);
      while (directory_ids.contains(id.bytes)) id = random_directory_id(random);
      directory_ids.emplace(id.bytes, dir);
      MetaProperties meta;
      meta.version = kMetaPropertiesVersion1;
      meta.cluster_id = expected_cluster_id;
      meta.node_id = node_id;
      meta.directory_id = id;
      CO_RETURN_IF_ERROR(co_await format_directory(disk, dir, std::move(meta), random));
    }
  }

  MetaProperties agreed;
  agreed.version = kMetaPropertiesVersion1;
  agreed.cluster_id = std::move(expected_cluster_id);
  agreed.node_id = node_id;
  co_return agreed;
}

}  // namespace brook::core
