// fuzz/log_recovery_input.h
//
// The input layout of fuzz_log_recovery, shared by the target (which splits
// an input into the files of a partition directory) and the seed generator
// (which builds inputs from files). Header-only, bytes only: no storage
// dependency.
//
// Layout (integers big-endian; bytes past the end of a short input read as 0):
//
//   offset size field
//        0    1 flags                 kSplit ... kStartOffset below
//        1    2 second base           base offset of the second segment
//        3    2 first length          bytes of the first segment (0: all the
//                                     rest, when there is no second segment)
//        5    2 index length          bytes of the first segment's .index
//        7    2 time index length     bytes of its .timeindex
//        9    2 snapshot length       bytes of the producer-state snapshot
//       11    2 snapshot offset       its file's offset; also the log start
//                                     offset and high watermark given to
//                                     Log::open with kStartOffset
//       13      first segment, index, time index, snapshot, then the rest:
//               the second segment with kSplit, else more of the first
//
// The first segment is `t-0/00000000000000000000.log`, the second
// `t-0/<second base>.log` (kSplit with a second base > 0). Index and
// snapshot sections are written only when their flag is set; with kDerived
// the index bytes are XORed over the correct index of the first segment (so
// all-zero bytes give an exact index, and the fuzzer moves from there).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace brook::fuzz::log_recovery {

// Flags (byte 0).
inline constexpr uint8_t kSplit = 1 << 0;       // a second segment
inline constexpr uint8_t kTrust = 1 << 1;       // recovery point = second base
inline constexpr uint8_t kFixCrc = 1 << 2;      // CRCs recomputed before writing
inline constexpr uint8_t kIndex = 1 << 3;       // write the first .index
inline constexpr uint8_t kTimeIndex = 1 << 4;   // write the first .timeindex
inline constexpr uint8_t kDerived = 1 << 5;     // index bytes XOR the true index
inline constexpr uint8_t kSnapshot = 1 << 6;    // write a .snapshot
inline constexpr uint8_t kStartOffset = 1 << 7; // log start offset and HW given

inline constexpr size_t kFlagsOffset = 0;
inline constexpr size_t kSecondBaseOffset = 1;
inline constexpr size_t kFirstLengthOffset = 3;
inline constexpr size_t kIndexLengthOffset = 5;
inline constexpr size_t kTimeIndexLengthOffset = 7;
inline constexpr size_t kSnapshotLengthOffset = 9;
inline constexpr size_t kSnapshotFileOffsetOffset = 11;
inline constexpr size_t kHeaderBytes = 13;

// One input, split. The spans point into the input.
struct Input {
  uint8_t flags = 0;
  uint16_t second_base = 0;
  uint16_t snapshot_offset = 0;
  std::span<const uint8_t> first;
  std::span<const uint8_t> index;
  std::span<const uint8_t> time_index;
  std::span<const uint8_t> snapshot;
  std::span<const uint8_t> second;
  // `first` continues with `second` (no second segment file).
  bool second_appended_to_first = false;

  bool has(uint8_t flag) const { return (flags & flag) != 0; }
  bool split() const { return has(kSplit) && second_base > 0; }
};

inline Input parse_input(std::span<const uint8_t> data) {
  uint8_t header[kHeaderBytes] = {};
  std::copy_n(data.begin(), std::min(data.size(), kHeaderBytes), header);
  const auto u16 = [&](size_t at) {
    return static_cast<uint16_t>((static_cast<uint16_t>(header[at]) << 8) | header[at + 1]);
  };
  Input in;
  in.flags = header[kFlagsOffset];
  in.second_base = u16(kSecondBaseOffset);
  in.snapshot_offset = u16(kSnapshotFileOffsetOffset);
  std::span<const uint8_t> rest = data.subspan(std::min(data.size(), kHeaderBytes));
  const auto take = [&](size_t n) {
    const std::span<const uint8_t> out = rest.first(std::min(n, rest.size()));
    rest = rest.subspan(out.size());
    return out;
  };
  const size_t first_length = u16(kFirstLengthOffset);
  in.first = take(first_length == 0 && !in.split() ? rest.size() : first_length);
  in.index = take(u16(kIndexLengthOffset));
  in.time_index = take(u16(kTimeIndexLengthOffset));
  in.snapshot = take(u16(kSnapshotLengthOffset));
  in.second = rest;
  in.second_appended_to_first = !in.split();
  return in;
}

// The inverse, for seeds. REQUIRES: every section shorter than 64 KiB.
struct InputParts {
  uint8_t flags = 0;
  uint16_t second_base = 0;
  uint16_t snapshot_offset = 0;
  std::string first;
  std::string index;
  std::string time_index;
  std::string snapshot;
  std::string second;
};

inline std::string encode_input(const InputParts& parts) {
  std::string out(kHeaderBytes, '\0');
  const auto put16 = [&](size_t at, size_t value) {
    out[at] = static_cast<char>((value >> 8) & 0xff);
    out[at + 1] = static_cast<char>(value & 0xff);
  };
  out[kFlagsOffset] = static_cast<char>(parts.flags);
  put16(kSecondBaseOffset, parts.second_base);
  put16(kFirstLengthOffset, parts.first.size());
  put16(kIndexLengthOffset, parts.index.size());
  put16(kTimeIndexLengthOffset, parts.time_index.size());
  put16(kSnapshotLengthOffset, parts.snapshot.size());
  put16(kSnapshotFileOffsetOffset, parts.snapshot_offset);
  out += parts.first;
  out += parts.index;
  out += parts.time_index;
  out += parts.snapshot;
  out += parts.second;
  return out;
}

}  // namespace brook::fuzz::log_recovery
