// core/meta_properties.h
//
// meta.properties: the file that marks a log directory as formatted for one
// node of one cluster, byte-compatible with Kafka's (its MetaProperties and
// MetaPropertiesEnsemble). A node refuses to start on a directory without
// one unless told to format it; `brook format` writes it, as
// `kafka-storage format` does.
//
// Text (java.util.Properties as Kafka stores it, every line ending in "\n"):
//
//   #
//   #Written by brook                   Kafka writes the date here
//   cluster.id=<22-character Uuid>
//   directory.id=<22-character Uuid>    optional
//   node.id=<N>                         broker.id in version 0
//   version=1
//
// Brook writes the keys sorted and a fixed second comment line (no date, so
// the bytes are a function of the values). The reader takes what
// Properties.load takes in practice: comment lines starting with '#' or '!',
// blank lines, `key=value` or `key:value` with whitespace around key and value
// ignored, "\r\n" line ends, a last line without "\n". Unknown keys are
// ignored (Kafka keeps them too). A missing version means 0, as in Kafka.
// Version 0 names the node `broker.id`, version 1 `node.id`; Brook needs the
// node id and the cluster id in both. Backslash escapes and continuation lines
// are refused: Kafka writes none for these values.
//
// Identifiers. A cluster id as Brook writes it is a Kafka Uuid in its text
// form (`kafka-storage random-uuid`); a cluster id read from a file is taken
// as any non-empty string, as Kafka does. Directory ids are Uuids, never one
// of Kafka's reserved ones (the first 100) and never starting with '-'.
//
// Errors. A malformed file is DataLoss naming the file (in read_*) and the
// 1-based line; a missing file is not an error. Disagreement between the
// directories of a node, or with the node's configuration, is
// FailedPrecondition; bad arguments are InvalidArgument. Disk errors pass
// through with the file named.
//
// Durability. Files are written with storage::write_file_atomically, and the
// directory chain they live in is synced: once format_directory() or
// ensure_formatted() returns OK, what they wrote survives a crash.
//
// All functions are pure except the io::Task ones, which touch only the Disk
// and Random they are given. Values are plain single-loop data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/disk.h"
#include "io/random.h"
#include "io/task.h"
#include "net/kafka/wire.h"

namespace brook::core {

inline constexpr std::string_view kMetaPropertiesFileName = "meta.properties";
inline constexpr int kMetaPropertiesVersion0 = 0;
inline constexpr int kMetaPropertiesVersion1 = 1;

struct MetaProperties {
  int version = kMetaPropertiesVersion1;
  std::string cluster_id;
  int32_t node_id = -1;
  std::optional<net::Uuid> directory_id;

  bool operator==(const MetaProperties&) const = default;
};

// "MetaProperties(version=1, clusterId=.., nodeId=.., directoryId=..)", as
// Kafka prints it.
std::string to_string(const MetaProperties& meta);

// The path of the meta.properties file of directory `dir` ("" is the Disk's
// root).
std::string meta_properties_path(std::string_view dir);

// --- Identifiers -------------------------------------------------------------

// A cluster id Brook accepts from a user: what Kafka's Uuid.fromString takes
// in its unpadded form, 22 base64url characters. As in Java's decoder the
// unused low bits of the last one may be set (Kafka's much-copied example id
// MkU3OEVBNTcwNTJENDM2Qk has them); the id is compared as text.
bool is_valid_cluster_id(std::string_view text);
using net::random_uuid;
// A new cluster id: random_uuid() as text (`kafka-storage random-uuid`).
std::string random_cluster_id(io::Random& random);
// Kafka's DirectoryId.reserved: high 64 bits zero and low 64 bits, read as a
// signed number, below 100 (unassigned, lost, migrating, room for more).
bool is_reserved_directory_id(const net::Uuid& id);
// Kafka's DirectoryId.random: not reserved, not starting with '-'.
net::Uuid random_directory_id(io::Random& random);

// --- The file's text ---------------------------------------------------------

// REQUIRES: version is 0 or 1; cluster_id is non-empty and has no character
// that would need escaping (whitespace, '\\', '=', ':', '#', '!', control
// characters); node_id >= 0.
std::string encode_meta_properties(const MetaProperties& meta);
// DataLoss on a malformed file: a line without '=' or ':', an empty key, a key
// given twice, a backslash, an unknown version, a bad or missing node id
// (`node.id`, or `broker.id` in version 0), a missing or empty cluster.id, a
// directory.id that is not a Uuid.
absl::StatusOr<MetaProperties> decode_meta_properties(std::string_view text);

// --- Directories ---------------------------------------------------------------

// The meta.properties of `dir`, or nullopt when it (or `dir`) does not exist.
io::Task<absl::StatusOr<std::optional<MetaProperties>>> read_meta_properties(io::Disk& disk,
                                                                             std::string dir);

// Formats `dir` (created with its missing parents when needed) for `meta`,
// drawing a directory id from `random` when meta.directory_id is unset.
// When `dir` already holds a meta.properties:
// - with `ignore_formatted` (kafka-storage's --ignore-formatted), it is left
//   as it is, whatever it says, and the call succeeds;
// - otherwise the call succeeds when the file says the same as `meta` (any
//   directory id matches an unset meta.directory_id), so a repeated format is
//   harmless, and fails with AlreadyExists when it says anything else; a
//   malformed file is its DataLoss.
// InvalidArgument when `meta` is not one Brook writes: version not 0 or 1,
// cluster_id not is_valid_cluster_id(), node_id < 0, a reserved directory id.
io::Task<absl::Status> format_directory(io::Disk& disk, std::string dir, MetaProperties meta,
                                        io::Random& random, bool ignore_formatted = false);

// The start-up check of a node's log directories (Kafka's
// MetaPropertiesEnsemble.verify). Reads every directory's meta.properties
// (duplicates in `dirs` count once; they are visited sorted) and requires:
// - every cluster.id equal, and equal to `cluster_id` unless it is empty;
//   otherwise FailedPrecondition "Invalid cluster.id in: <file>. Expected X,
//   but read Y";
// - every node id equal to `node_id`; otherwise FailedPrecondition "Stored
//   node id S doesn't match previous node id N in <file>. ...";
// - directory ids distinct and not reserved.
// A directory without the file is formatted (version 1, a fresh distinct
// directory id) when `format_if_missing`; otherwise FailedPrecondition
// "No meta.properties found in <dir> (have you run `brook format`?)".
// With `cluster_id` empty the stored one is used; when nothing is stored (and
// `format_if_missing`) a new one is drawn from `random`.
// Returns the agreed identity: version 1, the cluster id, `node_id`, and no
// directory id (each directory has its own).
// InvalidArgument when `dirs` is empty, `node_id` < 0, or a non-empty
// `cluster_id` is not is_valid_cluster_id().
io::Task<absl::StatusOr<MetaProperties>> ensure_formatted(io::Disk& disk,
                                                          std::vector<std::string> dirs,
                                                          std::string cluster_id, int32_t node_id,
                                                          bool format_if_missing,
                                                          io::Random& random);

}  // namespace brook::core
