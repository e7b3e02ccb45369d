// storage/txn_index.cc
#include "storage/txn_index.h"

#include <algorithm>
#include <utility>

#include "io/assert.h"
#include "io/status.h"
#include "net/codec/endian.h"
#include "storage/checkpoint.h"

namespace brook::storage {

namespace {

void check_entry(const AbortedTxn& txn) {
  BROOK_ASSERT_GE(txn.first_offset, 0);
  BROOK_ASSERT_LE(txn.first_offset, txn.last_offset);
}

void store_entry(const AbortedTxn& txn, std::byte* out) {
  codec::store_be<int16_t>(out + kAbortedTxnVersionOffset, kAbortedTxnVersion);
  codec::store_be<int64_t>(out + kAbortedTxnProducerIdOffset, txn.producer_id);
  codec::store_be<int64_t>(out + kAbortedTxnFirstOffsetOffset, txn.first_offset);
  codec::store_be<int64_t>(out + kAbortedTxnLastOffsetOffset, txn.last_offset);
  codec::store_be<int64_t>(out + kAbortedTxnLastStableOffsetOffset, txn.last_stable_offset);
}

// The entry at `bytes[position, position + kAbortedTxnBytes)`, validated
// against the entry before it.
absl::StatusOr<AbortedTxn> load_entry(std::span<const std::byte> bytes, size_t position,
                                      std::optional<int64_t> previous_last_offset) {
  const auto version = codec::load_be<int16_t>(bytes, position + kAbortedTxnVersionOffset);
  if (version != kAbortedTxnVersion) {
    return absl::DataLossError(
        fmt::format("unknown aborted transaction version {} at byte {} (expected {})", version,
                    position, kAbortedTxnVersion));
  }
  AbortedTxn txn;
  txn.producer_id = codec::load_be<int64_t>(bytes, position + kAbortedTxnProducerIdOffset);
  txn.first_offset = codec::load_be<int64_t>(bytes, position + kAbortedTxnFirstOffsetOffset);
  txn.last_offset = codec::load_be<int64_t>(bytes, position + kAbortedTxnLastOffsetOffset);
  txn.last_stable_offset =
      codec::load_be<int64_t>(bytes, position + kAbortedTxnLastStableOffsetOffset);
  if (txn.first_offset < 0 || txn.first_offset > txn.last_offset) {
    return absl::DataLossError(fmt::format("bad offsets in {} at byte {}", txn, position));
  }
  if (previous_last_offset.has_value() && txn.last_offset <= *previous_last_offset) {
    return absl::DataLossError(
        fmt::format("entries out of order at byte {}: last offset {} after {}", position,
                    txn.last_offset, *previous_last_offset));
  }
  return txn;
}

}  // namespace

io::Buffer encode_aborted_txn(const AbortedTxn& txn) {
  check_entry(txn);
  io::Buffer out = io::Buffer::allocate(kAbortedTxnBytes);
  store_entry(txn, out.mutable_data());
  return out;
}

void TransactionIndex::append(const AbortedTxn& txn) {
  check_entry(txn);
  if (!entries_.empty()) BROOK_ASSERT_GT(txn.last_offset, entries_.back().last_offset);
  entries_.push_back(txn);
}

bool TransactionIndex::collect_aborted(int64_t fetch_offset, int64_t upper_bound_offset,
                                       std::vector<AbortedTxn>* out) const {
  BROOK_ASSERT(out != nullptr);
  for (const AbortedTxn& txn : entries_) {
    if (txn.last_offset >= fetch_offset && txn.first_offset < upper_bound_offset) {
      out->push_back(txn);
    }
    // Kafka checks this whether or not the entry overlapped the range.
    if (txn.last_stable_offset >= upper_bound_offset) return true;
  }
  return false;
}

void TransactionIndex::truncate_to(int64_t offset) {
  const auto first_dropped =
      std::find_if(entries_.begin(), entries_.end(),
                   [offset](const AbortedTxn& txn) { return txn.last_offset >= offset; });
  entries_.erase(first_dropped, entries_.end());
  if (!entries_.empty()) BROOK_ASSERT_LT(entries_.back().last_offset, offset);
}

absl::Status TransactionIndex::sanity_check(int64_t base_offset) const {
  for (const AbortedTxn& txn : entries_) {
    if (txn.last_offset < base_offset) {
      return absl::DataLossError(
          fmt::format("last offset of {} is below the segment's base offset {}", txn, base_offset));
    }
  }
  return absl::OkStatus();
}

std::optional<int64_t> TransactionIndex::last_offset() const {
  if (entries_.empty()) return std::nullopt;
  return entries_.back().last_offset;
}

io::Buffer TransactionIndex::encode() const {
  io::Buffer out = io::Buffer::allocate(entries_.size() * kAbortedTxnBytes);
  std::byte* p = out.mutable_data();
  for (const AbortedTxn& txn : entries_) {
    store_entry(txn, p);
    p += kAbortedTxnBytes;
  }
  return out;
}

absl::StatusOr<TransactionIndex> TransactionIndex::decode(std::span<const std::byte> bytes) {
  if (bytes.size() % kAbortedTxnBytes != 0) {
    return absl::DataLossError(
        fmt::format("size {} is not a multiple of the {}-byte entry (torn or foreign file)",
                    bytes.size(), kAbortedTxnBytes));
  }
  TransactionIndex index;
  index.entries_.reserve(bytes.size() / kAbortedTxnBytes);
  for (size_t position = 0; position < bytes.size(); position += kAbortedTxnBytes) {
    absl::StatusOr<AbortedTxn> txn = load_entry(bytes, position, index.last_offset());
    if (!txn.ok()) return txn.status();
    index.entries_.push_back(*txn);
  }
  return index;
}

std::string txn_index_file_name(int64_t base_offset) {
  BROOK_ASSERT_GE(base_offset, 0);
  return fmt::format("{:020d}{}", base_offset, kTxnIndexFileSuffix);
}

io::Task<absl::StatusOr<TransactionIndex>> read_txn_index(io::Disk& disk, std::string path) {
  CO_ASSIGN_OR_RETURN(std::optional<io::Buffer> bytes, co_await read_whole_file(disk, path));
  if (!bytes.has_value()) co_return TransactionIndex();
  absl::StatusOr<TransactionIndex> index = TransactionIndex::decode(bytes->span());
  if (!index.ok()) co_return annotate_with_path(index.status(), path);
  co_return index;
}

io::Task<absl::Status> write_txn_index(io::Disk& disk, std::string path, TransactionIndex index) {
  io::Buffer bytes = index.encode();
  co_return co_await write_file_atomically(disk, std::move(path), std::move(bytes));
}

}  // namespace brook::storage
