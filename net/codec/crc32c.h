// net/codec/crc32c.h
//
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
// Kafka's record batches (magic v2: it covers the bytes from `attributes` to
// the end of the batch) and of iSCSI / RFC 3720.
//
// crc32c(crc, data, n) extends a finished checksum: crc32c(0, ...) of a range
// is Kafka's Crc32C of that range, and
//   crc32c(crc32c(0, a), b) == crc32c(0, a ++ b).
//
// Two implementations give identical results:
//   * hardware: the SSE4.2 crc32 instruction, six independent streams
//     interleaved to hide its latency, chosen at run time when the CPU has it
//     (the rest of the build needs no -msse4.2);
//   * software: slicing-by-8 tables, portable.
// All functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace brook::codec {

// The checksum of `n` bytes at `data`, extending `crc`. Uses the hardware path
// when available unless a test forced the software one.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);

inline uint32_t crc32c(uint32_t crc, std::span<const std::byte> bytes) {
  return crc32c(crc, bytes.data(), bytes.size());
}

// The portable implementation.
uint32_t crc32c_software(uint32_t crc, const void* data, size_t n);

// Whether this CPU has the crc32 instruction (x86-64 SSE4.2).
bool crc32c_hardware_available();

// The SSE4.2 implementation. REQUIRES: crc32c_hardware_available().
uint32_t crc32c_hardware(uint32_t crc, const void* data, size_t n);

enum class Crc32cPath : uint8_t { kHardware, kSoftware };

// The implementation crc32c() uses now.
Crc32cPath crc32c_path();

// Makes crc32c() use `path` from now on, process-wide; for tests and
// benchmarks only. Asking for kHardware on a CPU without it keeps the software
// path. Returns the path in effect afterwards.
Crc32cPath set_crc32c_path_for_testing(Crc32cPath path);

}  // namespace brook::codec
