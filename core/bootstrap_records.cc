// core/bootstrap_records.cc
#include "core/bootstrap_records.h"

#include <charconv>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "absl/strings/escaping.h"
#include "io/status.h"
#include "net/kafka/scram.h"
#include "storage/checkpoint.h"

namespace brook::core {

namespace {

std::string path_in(std::string_view dir) {
  if (dir.empty()) return std::string(kBootstrapRecordsFile);
  return fmt::format("{}/{}", dir, kBootstrapRecordsFile);
}

std::optional<std::string> unbase64(std::string_view text) {
  std::string out;
  if (!absl::Base64Unescape(absl::string_view(text.data(), text.size()), &out)) return std::nullopt;
  return out;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> parse_scram_settings(std::string_view bracketed) {
  if (bracketed.size() < 2 || bracketed.front() != '[' || bracketed.back() != ']') {
    return absl::InvalidArgumentError("the settings go in [...]");
  }
  const std::string_view body = bracketed.substr(1, bracketed.size() - 2);
  std::map<std::string, std::string> settings;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string_view::npos) comma = body.size();
    const std::string_view item = body.substr(start, comma - start);
    start = comma + 1;
    const size_t at = item.find('=');
    if (at == std::string_view::npos || at == 0) return absl::InvalidArgumentError(fmt::format("'{}' is not key=value", item));
    std::string value(item.substr(at + 1));
    // Kafka's examples quote values.
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    if (!settings.emplace(std::string(item.substr(0, at)), std::move(value)).second) {
      return absl::InvalidArgumentError(fmt::format("'{}' is given twice", item.substr(0, at)));
    }
  }
  return settings;
}

absl::StatusOr<net::UserScramCredentialRecord> parse_add_scram(std::string_view argument, io::Random& random) {
  const size_t eq = argument.find('=');
  const std::optional<net::ScramMechanism> mechanism =
      eq == std::string_view::npos ? std::nullopt : net::scram_mechanism(argument.substr(0, eq));
  if (!mechanism.has_value()) {
    return absl::InvalidArgumentError(fmt::format(
        "--add-scram {}: expected SCRAM-SHA-256=[name=N,password=P] or SCRAM-SHA-512=[...]", argument));
  }
  absl::StatusOr<std::map<std::string, std::string>> parsed = parse_scram_settings(argument.substr(eq + 1));
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(fmt::format("--add-scram {}: {}", argument, std::string(parsed.status().message())));
  }
  std::map<std::string, std::string>& settings = *parsed;
  for (const auto& [key, value] : settings) {
    if (key != "name" && key != "password" && key != "iterations" && key != "salt" && key != "saltedpassword") {
      return absl::InvalidArgumentError(fmt::format("--add-scram: unknown setting '{}'", key));
    }
  }
  net::UserScramCredentialRecord record;
  record.mechanism = net::scram_type(*mechanism);
  if (!settings.contains("name") || settings["name"].empty()) {
    return absl::InvalidArgumentError("--add-scram: name=... is required");
  }
  record.name = settings["name"];
  int32_t iterations = net::kScramMinIterations;
  if (settings.contains("iterations")) {
    const std::string& text = settings["iterations"];
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), iterations);
    if (ec != std::errc() || end != text.data() + text.size() || iterations < net::kScramMinIterations ||
        iterations > net::kScramMaxIterations) {
      return absl::InvalidArgumentError(fmt::format("--add-scram: iterations={} (allowed: {} to {})", text,
                                                    net::kScramMinIterations, net::kScramMaxIterations));
    }
  }
  std::string salt;
  if (settings.contains("salt")) {
    std::optional<std::string> decoded = unbase64(settings["salt"]);
    if (!decoded.has_value() || decoded->empty()) return absl::InvalidArgumentError("--add-scram: salt is not base64");
    salt = std::move(*decoded);
  } else {
    salt.resize(32);
    for (char& c : salt) c = static_cast<char>(random.uniform(256));
  }
  net::ScramCredential credential;
  if (settings.contains("password") == settings.contains("saltedpassword")) {
    return absl::InvalidArgumentError("--add-scram: one of password=... and saltedpassword=... is required");
  }
  if (settings.contains("saltedpassword")) {
    std::optional<std::string> salted = unbase64(settings["saltedpassword"]);
    if (!salted.has_value() || !settings.contains("salt")) {
      return absl::InvalidArgumentError("--add-scram: saltedpassword needs salt, both base64");
    }
    credential = net::scram_credential_from_salted(*mechanism, *salted, salt, iterations);
  } else {
    credential = net::scram_credential(*mechanism, settings["password"], salt, iterations);
  }
  record.salt = io::Buffer::copy_of(std::string_view(credential.salt));
  record.stored_key = io::Buffer::copy_of(std::string_view(credential.stored_key));
  record.server_key = io::Buffer::copy_of(std::string_view(credential.server_key));
  record.iterations = iterations;
  return record;
}

std::string encode_bootstrap_records(const std::vector<metadata::MetadataRecord>& records) {
  std::string out = "# The records a new cluster's metadata log starts with (brook format --add-scram).\nversion=1\n";
  for (const metadata::MetadataRecord& r : records) {
    absl::StatusOr<io::Buffer> bytes = metadata::encode_metadata_record(metadata::at_highest_version(r));
    if (!bytes.ok()) continue;  // every record here is a valid UserScramCredentialRecord
    const std::string_view v = bytes->view();
    out += "record=" + absl::Base64Escape(absl::string_view(v.data(), v.size())) + "\n";
  }
  return out;
}

absl::StatusOr<std::vector<metadata::MetadataRecord>> decode_bootstrap_records(std::string_view text) {
  std::vector<metadata::MetadataRecord> out;
  bool versioned = false;
  int line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (line.empty() || line.front() == '#') continue;
    if (line == "version=1") {
      versioned = true;
      continue;
    }
    if (!versioned || !line.starts_with("record=")) {
      return absl::DataLossError(fmt::format("line {}: expected version=1, then record=BASE64 lines", line_number));
    }
    std::optional<std::string> bytes = unbase64(line.substr(7));
    if (!bytes.has_value()) return absl::DataLossError(fmt::format("line {}: the record is not base64", line_number));
    absl::StatusOr<metadata::MetadataRecordAndVersion> record =
        metadata::decode_metadata_record(io::Buffer::copy_of(std::string_view(*bytes)));
    if (!record.ok()) {
      return absl::DataLossError(fmt::format("line {}: {}", line_number, std::string(record.status().message())));
    }
    if (!std::holds_alternative<net::UserScramCredentialRecord>(record->record)) {
      return absl::DataLossError(fmt::format("line {}: {} is not a bootstrap record", line_number,
                                             metadata::record_name(record->record)));
    }
    out.push_back(std::move(record->record));
  }
  if (!versioned) return absl::DataLossError("no version=1 line");
  return out;
}

io::Task<absl::StatusOr<std::vector<metadata::MetadataRecord>>> read_bootstrap_records(io::Disk& disk,
                                                                                      std::string dir) {
  const std::string path = path_in(dir);
  CO_ASSIGN_OR_RETURN(std::optional<io::Buffer> bytes, co_await storage::read_whole_file_agreed(disk, path));
  if (!bytes.has_value()) co_return std::vector<metadata::MetadataRecord>();
  absl::StatusOr<std::vector<metadata::MetadataRecord>> records = decode_bootstrap_records(bytes->view());
  if (!records.ok()) co_return storage::annotate_with_path(records.status(), path);
  co_return records;
}

io::Task<absl::Status> write_bootstrap_records(io::Disk& disk, std::string dir,
                                               std::vector<metadata::MetadataRecord> records) {
  const std::string text = encode_bootstrap_records(records);
  co_return co_await storage::write_file_atomically(disk, path_in(dir), io::Buffer::copy_of(std::string_view(text)));
}

}  // namespace brook::core
