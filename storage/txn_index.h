// storage/txn_index.h
//
// The transaction index of one log segment (the `.txnindex` file; Kafka's
// TransactionIndex, KIP-98): the transactions aborted by an ABORT marker in
// that segment, so a READ_COMMITTED fetch can tell the consumer which
// producers' records in its range to drop. A transaction may start in an
// earlier segment; only its marker decides which index holds it.
//
// Owned by its segment; used only on that partition's event loop. The index
// lives in memory; the log appends encode_aborted_txn() bytes to the file as
// it appends entries, rewrites it with write_txn_index() after truncation,
// and rebuilds it from the segment when read_txn_index() reports DataLoss.
//
// Invariants: entries are in strictly increasing last_offset order (the
// order of their markers in the log) and each has
// 0 <= first_offset <= last_offset. last_stable_offset is the partition's LSO
// when the abort was written; it is not ordered against the other fields.
//
// On disk: the entries back to back, no header, each kAbortedTxnBytes
// big-endian bytes:
//
//   offset size field
//        0    2 version              kAbortedTxnVersion (0)
//        2    8 producer_id
//       10    8 first_offset         offset of the transaction's first record
//       18    8 last_offset          offset of the ABORT marker
//       26    8 last_stable_offset
//       34
//
// decode() rejects, with DataLoss: a size that is not a multiple of 34 (Kafka
// ignores a partial tail entry; Brook rebuilds the index instead), a version
// other than 0, first_offset outside [0, last_offset], and last offsets that
// do not strictly increase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "io/buffer.h"
#include "io/disk.h"
#include "io/task.h"

namespace brook::storage {

inline constexpr int16_t kAbortedTxnVersion = 0;
inline constexpr size_t kAbortedTxnVersionOffset = 0;
inline constexpr size_t kAbortedTxnProducerIdOffset = kAbortedTxnVersionOffset + 2;
inline constexpr size_t kAbortedTxnFirstOffsetOffset = kAbortedTxnProducerIdOffset + 8;
inline constexpr size_t kAbortedTxnLastOffsetOffset = kAbortedTxnFirstOffsetOffset + 8;
inline constexpr size_t kAbortedTxnLastStableOffsetOffset = kAbortedTxnLastOffsetOffset + 8;
inline constexpr size_t kAbortedTxnBytes = kAbortedTxnLastStableOffsetOffset + 8;
static_assert(kAbortedTxnBytes == 34);

inline constexpr std::string_view kTxnIndexFileSuffix = ".txnindex";

// One aborted transaction (Kafka's AbortedTxn).
struct AbortedTxn {
  int64_t producer_id = 0;
  int64_t first_offset = 0;
  int64_t last_offset = 0;
  int64_t last_stable_offset = 0;

  bool operator==(const AbortedTxn&) const = default;
};

// The file bytes of one entry. REQUIRES: 0 <= first_offset <= last_offset.
io::Buffer encode_aborted_txn(const AbortedTxn& txn);

class TransactionIndex {
 public:
  TransactionIndex() = default;

  // REQUIRES: 0 <= txn.first_offset <= txn.last_offset, and
  // txn.last_offset > last_offset() when the index is not empty.
  void append(const AbortedTxn& txn);

  // Appends to `out` every entry that overlaps the fetch range
  // [fetch_offset, upper_bound_offset): last_offset >= fetch_offset and
  // first_offset < upper_bound_offset, in index order. Returns true when the
  // search is complete: an entry with last_stable_offset >= upper_bound_offset
  // was reached, so no later segment can hold a transaction overlapping the
  // range; the entries after it are not looked at. False means the caller
  // must search the next segment too (Kafka's TxnIndexSearchResult).
  // REQUIRES: out != nullptr.
  bool collect_aborted(int64_t fetch_offset, int64_t upper_bound_offset,
                       std::vector<AbortedTxn>* out) const;

  // Drops the entries with last_offset >= offset (the log was truncated to
  // end before `offset`).
  void truncate_to(int64_t offset);
  // Drops every entry.
  void clear() { entries_.clear(); }

  // Kafka's sanityCheck: DataLoss when an entry's last_offset lies below the
  // segment's base offset (the index belongs to another segment).
  absl::Status sanity_check(int64_t base_offset) const;

  const std::vector<AbortedTxn>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  std::optional<int64_t> last_offset() const;

  // The whole file.
  io::Buffer encode() const;
  // DataLoss on malformed bytes (see the header comment), naming the byte
  // position of the bad entry.
  static absl::StatusOr<TransactionIndex> decode(std::span<const std::byte> bytes);

 private:
  std::vector<AbortedTxn> entries_;
};

// "<base offset as 20 digits>.txnindex", e.g. "00000000000000000042.txnindex".
// REQUIRES: base_offset >= 0.
std::string txn_index_file_name(int64_t base_offset);

// A missing file reads as an empty index. DataLoss names the file.
io::Task<absl::StatusOr<TransactionIndex>> read_txn_index(io::Disk& disk, std::string path);
// Replaces the file durably (storage/checkpoint.h, write_file_atomically).
io::Task<absl::Status> write_txn_index(io::Disk& disk, std::string path, TransactionIndex index);

}  // namespace brook::storage

template <>
struct fmt::formatter<brook::storage::AbortedTxn> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const brook::storage::AbortedTxn& t, FormatContext& ctx) const {
    return fmt::format_to(ctx.out(),
                          "AbortedTxn(producer_id={}, first_offset={}, last_offset={}, "
                          "last_stable_offset={})",
                          t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset);
  }
};
