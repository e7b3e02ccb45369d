// net/codec/crc32c.cc
//
// Both CRC-32C implementations work on the raw CRC register (no pre- or
// post-inversion); the public functions invert on the way in and out, which
// is what makes crc32c() extend a finished checksum.
//
// The hardware path splits long inputs into six adjacent streams of equal
// length L, runs one crc32 chain per stream and joins them. The instruction's
// latency is three cycles and, depending on the core, one or two can start
// per cycle, so one chain leaves it idle most of the time while six keep it
// busy either way. The register is linear over GF(2): running a register r
// over bytes B gives shift_L(r) ^ raw(0, B), where shift_L advances r over L
// zero bytes. So with chain results c0 (started at r) and c1..c5 (started at
// 0), raw(r, S0 ++ ... ++ S5) = shift_L(...shift_L(shift_L(c0) ^ c1)...) ^ c5.
// shift_L is a 32x32 bit matrix applied a byte at a time through four
// 256-entry tables, built at compile time for the two stream lengths used.
#include "net/codec/crc32c.h"

#include <array>
#include <bit>
#include <atomic>
#include <cstring>

#include "io/assert.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#define BROOK_CRC32C_HAVE_SSE42 1
#define BROOK_TARGET_SSE42 __attribute__((target("sse4.2")))
#else
#define BROOK_CRC32C_HAVE_SSE42 0
#endif

namespace brook::codec {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // Castagnoli, bit-reflected

using Table = std::array<uint32_t, 256>;

// kSlicing[k][b]: the register contribution of byte b followed by k zero bytes.
constexpr std::array<Table, 8> make_slicing_tables() {
  std::array<Table, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c >> 1) ^ (kPolynomial & (0u - (c & 1u)));
    t[0][i] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
  return t;
}
constexpr std::array<Table, 8> kSlicing = make_slicing_tables();

inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

uint32_t software_raw(uint32_t c, const uint8_t* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    const uint64_t w = load_le64(p) ^ c;
    c = kSlicing[7][w & 0xff] ^ kSlicing[6][(w >> 8) & 0xff] ^ kSlicing[5][(w >> 16) & 0xff] ^
        kSlicing[4][(w >> 24) & 0xff] ^ kSlicing[3][(w >> 32) & 0xff] ^
        kSlicing[2][(w >> 40) & 0xff] ^ kSlicing[1][(w >> 48) & 0xff] ^ kSlicing[0][w >> 56];
  }
  for (; n > 0; ++p, --n) c = kSlicing[0][(c ^ *p) & 0xff] ^ (c >> 8);
  return c;
}

#if BROOK_CRC32C_HAVE_SSE42

// Advances a register over a fixed number of zero bytes.
struct ShiftTable {
  std::array<Table, 4> t;
  uint32_t apply(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

constexpr ShiftTable make_shift_table(size_t zero_bytes) {
  // The image of each register bit; the tables are their XOR combinations.
  std::array<uint32_t, 32> image{};
  for (int bit = 0; bit < 32; ++bit) {
    uint32_t c = 1u << bit;
    for (size_t i = 0; i < zero_bytes; ++i) c = kSlicing[0][c & 0xff] ^ (c >> 8);
    image[bit] = c;
  }
  ShiftTable s{};
  for (size_t k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t v = 0;
      for (size_t j = 0; j < 8; ++j) {
        if ((b >> j) & 1u) v ^= image[8 * k + j];
      }
      s.t[k][b] = v;
    }
  }
  return s;
}

// Stream lengths: long blocks amortise the join (five table shifts, ~40
// cycles) over 6 x 4 KiB; short blocks keep mid-sized inputs on six chains.
constexpr size_t kStreams = 6;
constexpr size_t kLongStreamBytes = 4096;
constexpr size_t kShortStreamBytes = 128;
constexpr ShiftTable kLongShift = make_shift_table(kLongStreamBytes);
constexpr ShiftTable kShortShift = make_shift_table(kShortStreamBytes);

// One block of kStreams * kStreamBytes bytes. Six named chains (not an
// array) so that each lives in a register.
template <size_t kStreamBytes>
BROOK_TARGET_SSE42 inline uint32_t hardware_block(uint32_t r, const uint8_t* p,
                                                  const ShiftTable& shift) {
  static_assert(kStreamBytes % 8 == 0 && kStreams == 6);
  uint64_t c0 = r;
  uint64_t c1 = 0;
  uint64_t c2 = 0;
  uint64_t c3 = 0;
  uint64_t c4 = 0;
  uint64_t c5 = 0;
  for (size_t i = 0; i < kStreamBytes; i += 8) {
    c0 = _mm_crc32_u64(c0, load_le64(p + i));
    c1 = _mm_crc32_u64(c1, load_le64(p + kStreamBytes + i));
    c2 = _mm_crc32_u64(c2, load_le64(p + 2 * kStreamBytes + i));
    c3 = _mm_crc32_u64(c3, load_le64(p + 3 * kStreamBytes + i));
    c4 = _mm_crc32_u64(c4, load_le64(p + 4 * kStreamBytes + i));
    c5 = _mm_crc32_u64(c5, load_le64(p + 5 * kStreamBytes + i));
  }
  uint32_t joined = static_cast<uint32_t>(c0);
  for (uint64_t c : {c1, c2, c3, c4, c5}) joined = shift.apply(joined) ^ static_cast<uint32_t>(c);
  return joined;
}

BROOK_TARGET_SSE42 uint32_t hardware_raw(uint32_t r, const uint8_t* p, size_t n) {
  constexpr size_t kLongBlockBytes = kStreams * kLongStreamBytes;
  constexpr size_t kShortBlockBytes = kStreams * kShortStreamBytes;
  for (; n >= kLongBlockBytes; p += kLongBlockBytes, n -= kLongBlockBytes) {
    r = hardware_block<kLongStreamBytes>(r, p, kLongShift);
  }
  for (; n >= kShortBlockBytes; p += kShortBlockBytes, n -= kShortBlockBytes) {
    r = hardware_block<kShortStreamBytes>(r, p, kShortShift);
  }
  uint64_t r64 = r;
  for (; n >= 8; p += 8, n -= 8) r64 = _mm_crc32_u64(r64, load_le64(p));
  r = static_cast<uint32_t>(r64);
  for (; n > 0; ++p, --n) r = _mm_crc32_u8(r, *p);
  return r;
}

BROOK_TARGET_SSE42 uint32_t hardware_unchecked(uint32_t crc, const void* data, size_t n) {
  return ~hardware_raw(~crc, static_cast<const uint8_t*>(data), n);
}

#endif  // BROOK_CRC32C_HAVE_SSE42

using Crc32cFn = uint32_t (*)(uint32_t, const void*, size_t);

uint32_t crc32c_resolve(uint32_t crc, const void* data, size_t n);

// The implementation crc32c() calls. Starts at the resolver, which replaces
// itself on first use; changed afterwards only by set_crc32c_path_for_testing.
constinit std::atomic<Crc32cFn> g_crc32c{&crc32c_resolve};

Crc32cFn best_implementation() {
#if BROOK_CRC32C_HAVE_SSE42
  if (crc32c_hardware_available()) return &hardware_unchecked;
#endif
  return &crc32c_software;
}

uint32_t crc32c_resolve(uint32_t crc, const void* data, size_t n) {
  const Crc32cFn fn = best_implementation();
  g_crc32c.store(fn, std::memory_order_relaxed);
  return fn(crc, data, n);
}

}  // namespace

uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
  return g_crc32c.load(std::memory_order_relaxed)(crc, data, n);
}

uint32_t crc32c_software(uint32_t crc, const void* data, size_t n) {
  return ~software_raw(~crc, static_cast<const uint8_t*>(data), n);
}

bool crc32c_hardware_available() {
#if BROOK_CRC32C_HAVE_SSE42
  static const bool available = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return available;
#else
  return false;
#endif
}

uint32_t crc32c_hardware(uint32_t crc, const void* data, size_t n) {
  BROOK_ASSERT(crc32c_hardware_available());
#if BROOK_CRC32C_HAVE_SSE42
  return hardware_unchecked(crc, data, n);
#else
  return crc;
#endif
}

Crc32cPath crc32c_path() {
  Crc32cFn fn = g_crc32c.load(std::memory_order_relaxed);
  if (fn == &crc32c_resolve) fn = best_implementation();
  return fn == &crc32c_software ? Crc32cPath::kSoftware : Crc32cPath::kHardware;
}

Crc32cPath set_crc32c_path_for_testing(Crc32cPath path) {
  const Crc32cFn fn = path == Crc32cPath::kSoftware ? &crc32c_software : best_implementation();
  g_crc32c.store(fn, std::memory_order_relaxed);
  return crc32c_path();
}

}  // namespace brook::codec
