// raft/voter_set.cc
#include "raft/voter_set.h"

#include <fmt/format.h>

#include <algorithm>

#include "io/status.h"
#include "net/kafka/message.h"
#include "net/kafka/messages/k_raft_version_record.h"
#include "net/kafka/messages/voters_record.h"
#include "net/kafka/record_batch.h"

namespace brook::raft {

namespace {

constexpr size_t kControlBatchBytesMax = size_t{64} << 20;

template <typename M>
absl::StatusOr<io::Buffer> flat(const M& message) {
  io::BufferChain chain;
  RETURN_IF_ERROR(net::encode_to(message, 0, &chain));
  std::string bytes;
  for (const io::Buffer& part : chain.parts()) bytes.append(part.view());
  return io::Buffer::copy_of(bytes);
}

}  // namespace

std::optional<io::Address> Voter::address(const std::string& listener) const {
  for (const VoterEndpoint& e : endpoints) {
    if (e.name == listener) return e.address;
  }
  if (!endpoints.empty()) return endpoints.front().address;
  return std::nullopt;
}

VoterSet static_voters(const std::map<int32_t, io::Address>& voters, const std::string& listener) {
  VoterSet out;
  for (const auto& [id, address] : voters) {
    Voter v;
    v.id = id;
    v.endpoints.push_back(VoterEndpoint{listener, address});
    v.max_kraft_version = 0;
    out.emplace(id, std::move(v));
  }
  return out;
}

absl::StatusOr<io::Buffer> encode_kraft_version_record(int16_t kraft_version) {
  net::KRaftVersionRecord record;
  record.k_raft_version = kraft_version;
  return flat(record);
}

absl::StatusOr<io::Buffer> encode_voters_record(const VoterSet& voters) {
  net::VotersRecord record;
  for (const auto& [id, v] : voters) {
    net::VotersRecord::Voter out;
    out.voter_id = id;
    out.voter_directory_id = v.directory_id;
    out.endpoints = listeners_of<net::VotersRecord::Endpoint>(v.endpoints);
    out.k_raft_version_feature.min_supported_version = v.min_kraft_version;
    out.k_raft_version_feature.max_supported_version = v.max_kraft_version;
    record.voters.push_back(std::move(out));
  }
  return flat(record);
}

absl::StatusOr<VoterSet> decode_voters_record(const io::Buffer& value) {
  absl::StatusOr<net::VotersRecord> record = net::decode<net::VotersRecord>(value, 0);
  if (!record.ok()) return absl::DataLossError(fmt::format("VotersRecord: {}", std::string(record.status().message())));
  VoterSet out;
  for (const net::VotersRecord::Voter& in : record->voters) {
    Voter v;
    v.id = in.voter_id;
    v.directory_id = in.voter_directory_id;
    v.endpoints = endpoints_of(in.endpoints);
    v.min_kraft_version = in.k_raft_version_feature.min_supported_version;
    v.max_kraft_version = in.k_raft_version_feature.max_supported_version;
    if (v.id < 0 || !out.emplace(v.id, v).second) {
      return absl::DataLossError(fmt::format("VotersRecord: voter id {} is negative or repeated", v.id));
    }
  }
  if (out.empty()) return absl::DataLossError("VotersRecord: no voters");
  return out;
}

absl::Status append_kraft_control(net::RecordBatchBuilder& builder, const KRaftControl& control,
                                  int64_t timestamp_ms) {
  auto add = [&](net::ControlRecordType type, io::Buffer value) {
    net::NewRecord record;
    record.timestamp_ms = timestamp_ms;
    record.key = net::encode_control_record_key({.version = net::kControlRecordKeyVersion, .type = type});
    record.value = std::move(value);
    builder.append(std::move(record));
  };
  if (control.kraft_version.has_value()) {
    ASSIGN_OR_RETURN(io::Buffer value, encode_kraft_version_record(*control.kraft_version));
    add(net::ControlRecordType::kKRaftVersion, std::move(value));
  }
  if (control.voters.has_value()) {
    ASSIGN_OR_RETURN(io::Buffer value, encode_voters_record(*control.voters));
    add(net::ControlRecordType::kKRaftVoters, std::move(value));
  }
  return absl::OkStatus();
}

absl::StatusOr<KRaftControl> read_kraft_control(const io::Buffer& batch_bytes) {
  ASSIGN_OR_RETURN(std::vector<net::Record> records, net::decode_records(batch_bytes, kControlBatchBytesMax));
  KRaftControl out;
  for (const net::Record& r : records) {
    if (!r.key.has_value()) continue;
    absl::StatusOr<net::ControlRecordKey> key = net::decode_control_record_key(r.key->span());
    if (!key.ok()) continue;
    if (key->type == net::ControlRecordType::kKRaftVersion) {
      if (!r.value.has_value()) return absl::DataLossError("KRaftVersionRecord without a value");
      absl::StatusOr<net::KRaftVersionRecord> v = net::decode<net::KRaftVersionRecord>(*r.value, 0);
      if (!v.ok()) return absl::DataLossError(fmt::format("KRaftVersionRecord: {}", std::string(v.status().message())));
      out.kraft_version = v->k_raft_version;
    } else if (key->type == net::ControlRecordType::kKRaftVoters) {
      if (!r.value.has_value()) return absl::DataLossError("VotersRecord without a value");
      ASSIGN_OR_RETURN(VoterSet voters, decode_voters_record(*r.value));
      out.voters = std::move(voters);
    }
  }
  return out;
}

void VoterHistory::reset(int64_t offset, int16_t kraft_version, VoterSet voters) {
  entries_.clear();
  entries_.push_back(Entry{offset, kraft_version, std::move(voters)});
}

void VoterHistory::add(int64_t offset, const KRaftControl& control) {
  if (!control.kraft_version.has_value() && !control.voters.has_value()) return;
  // Read again (a re-scan of the same log): later entries are replaced.
  while (entries_.size() > 1 && entries_.back().offset >= offset) entries_.pop_back();
  Entry e = entries_.empty() ? Entry{} : entries_.back();
  e.offset = offset;
  if (control.kraft_version.has_value()) e.kraft_version = *control.kraft_version;
  if (control.voters.has_value()) e.voters = *control.voters;
  entries_.push_back(std::move(e));
}

void VoterHistory::truncate_to(int64_t end) {
  while (entries_.size() > 1 && entries_.back().offset >= end) entries_.pop_back();
}

const VoterHistory::Entry& VoterHistory::before(int64_t end) const {
  const Entry* found = &entries_.front();
  for (const Entry& e : entries_) {
    if (e.offset < end) found = &e;
  }
  return *found;
}

}  // namespace brook::raft
