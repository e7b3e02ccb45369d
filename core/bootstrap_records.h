// core/bootstrap_records.h
//
// Records a new cluster's metadata log starts with besides metadata.version:
// what `kafka-storage format --add-scram` puts in Kafka's bootstrap
// checkpoint. `brook format --add-scram` writes them into
// DIR/bootstrap.records; a controller that finds its metadata log empty
// writes them, with the metadata.version record, in its first batch. So a
// cluster whose brokers log in to each other with SCRAM has their
// credentials before any broker replicates.
//
// The file's text: a "version=1" line, then one "record=BASE64" line per
// record (the record as the metadata log encodes it, at its highest
// version); '#' lines are comments. Only UserScramCredentialRecord is
// taken; anything else, or a malformed line, is DataLoss.
//
// --add-scram takes Kafka's argument:
//   SCRAM-SHA-256=[name=alice,password=alice-secret]
//   SCRAM-SHA-512=[name=alice,iterations=8192,salt=BASE64,saltedpassword=BASE64]
// (password, or a salt and salted password; iterations 4096 to 16384,
// 4096 by default; a salt drawn from `random` when none is given).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/metadata/record_serde.h"
#include "io/buffer.h"
#include "io/disk.h"
#include "io/random.h"
#include "io/task.h"

namespace brook::core {

inline constexpr std::string_view kBootstrapRecordsFile = "bootstrap.records";

absl::StatusOr<net::UserScramCredentialRecord> parse_add_scram(std::string_view argument, io::Random& random);

// "[k=v,k2=v2]" (the value of a SCRAM setting in --add-scram and in
// kafka-configs' --add-config) -> its settings, quotes around a value
// dropped; InvalidArgument for anything else or a key given twice.
absl::StatusOr<std::map<std::string, std::string>> parse_scram_settings(std::string_view bracketed);

std::string encode_bootstrap_records(const std::vector<metadata::MetadataRecord>& records);
absl::StatusOr<std::vector<metadata::MetadataRecord>> decode_bootstrap_records(std::string_view text);

// DIR/bootstrap.records ("" for the disk's root); nothing when absent.
io::Task<absl::StatusOr<std::vector<metadata::MetadataRecord>>> read_bootstrap_records(io::Disk& disk,
                                                                                      std::string dir);
io::Task<absl::Status> write_bootstrap_records(io::Disk& disk, std::string dir,
                                               std::vector<metadata::MetadataRecord> records);

}  // namespace brook::core
