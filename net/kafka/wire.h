// net/kafka/wire.h
//
// The primitives generated Kafka messages are read and written with.
//
// Reader walks one contiguous frame (an io::Buffer) with bounds checks on
// every read. Errors are sticky: the first failure is recorded, later reads
// return zeros and empty values, and the caller checks status() once at the
// end. Every length read from the wire is checked against the bytes left
// before anything is allocated for it, so no allocation is ever sized by
// untrusted input beyond the frame itself. `bytes` and `records` fields are
// returned as slices of the frame (no copy).
//
// Writer fills one allocation sized exactly by a Sizer pass, except for
// zero-copy fields (`records`), whose Buffers are spliced into the output
// BufferChain between slices of that allocation.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "io/buffer.h"
#include "io/random.h"
#include "net/codec/varint.h"

namespace brook::net {

// A Kafka UUID: 16 bytes, written big-endian as two int64s.
struct Uuid {
  std::array<uint8_t, 16> bytes{};
  bool operator==(const Uuid&) const = default;
  bool is_zero() const { return *this == Uuid{}; }
  // Kafka's text form: URL-safe base64 without padding (22 characters).
  std::string to_string() const;
};

// Kafka's Uuid.randomUuid: never zero, never the metadata topic's id (0, 1),
// never starting with '-' in its text form.
Uuid random_uuid(io::Random& random);

// A tagged field this code does not know, kept so it can be re-emitted.
struct RawTag {
  uint32_t tag = 0;
  io::Buffer data;
  bool operator==(const RawTag&) const = default;
};
using RawTags = std::vector<RawTag>;

// The byte counts of an encoding: everything, and the part spliced in
// without copying (records).
struct Sizer {
  size_t bytes = 0;
  size_t zero_copy = 0;
};

template <typename T>
inline T byte_swap(T v) {
  if constexpr (sizeof(T) == 2) {
    return __builtin_bswap16(v);
  } else if constexpr (sizeof(T) == 4) {
    return __builtin_bswap32(v);
  } else if constexpr (sizeof(T) == 8) {
    return __builtin_bswap64(v);
  } else {
    return v;
  }
}

inline size_t uvarint_size(uint32_t v) { return codec::size_of_unsigned_varint(v); }
inline size_t uvarlong_size(uint64_t v) { return codec::size_of_unsigned_varlong(v); }
inline size_t varint_size(int32_t v) { return codec::size_of_varint(v); }
inline size_t varlong_size(int64_t v) { return codec::size_of_varlong(v); }

// Size of a length-prefixed run of `n` bytes (or a null when n < 0).
inline size_t string_size(int64_t n, bool compact) {
  if (!compact) return 2 + static_cast<size_t>(n < 0 ? 0 : n);
  return n < 0 ? 1 : uvarint_size(static_cast<uint32_t>(n + 1)) + static_cast<size_t>(n);
}
inline size_t bytes_size(int64_t n, bool compact) {
  if (!compact) return 4 + static_cast<size_t>(n < 0 ? 0 : n);
  return n < 0 ? 1 : uvarint_size(static_cast<uint32_t>(n + 1)) + static_cast<size_t>(n);
}
inline size_t array_size(int64_t n, bool compact) {
  if (!compact) return 4;
  return n < 0 ? 1 : uvarint_size(static_cast<uint32_t>(n + 1));
}

class Reader {
 public:
  explicit Reader(const io::Buffer& frame)
      : frame_(&frame), data_(frame.data()), pos_(0), end_(frame.size()) {}
  // A reader over frame[begin, end).
  Reader(const io::Buffer& frame, size_t begin, size_t end)
      : frame_(&frame), data_(frame.data()), pos_(begin), end_(end) {}

  bool ok() const { return error_ == nullptr; }
  absl::Status status() const;
  size_t position() const { return pos_; }
  size_t remaining() const { return end_ - pos_; }
  const io::Buffer& frame() const { return *frame_; }
  // Payload bytes copied out of the frame so far (strings); bytes and
  // records fields are slices and copy nothing.
  size_t bytes_copied() const { return copied_; }
  // Records the first failure; later reads yield zeros.
  void fail(const char* what);
  void fail_field(const char* what, const char* field);

  int8_t i8() { return static_cast<int8_t>(fixed<uint8_t>()); }
  uint8_t u8() { return fixed<uint8_t>(); }
  int16_t i16() { return static_cast<int16_t>(fixed<uint16_t>()); }
  uint16_t u16() { return fixed<uint16_t>(); }
  int32_t i32() { return static_cast<int32_t>(fixed<uint32_t>()); }
  uint32_t u32() { return fixed<uint32_t>(); }
  int64_t i64() { return static_cast<int64_t>(fixed<uint64_t>()); }
  double f64() { return std::bit_cast<double>(fixed<uint64_t>()); }
  bool boolean() { return u8() != 0; }
  Uuid uuid();

  uint32_t uvarint() {
    uint32_t v = 0;
    const size_t n = codec::read_unsigned_varint({data_ + pos_, end_ - pos_}, &v);
    if (n == 0) [[unlikely]] {
      fail("malformed or truncated varint");
      return 0;
    }
    pos_ += n;
    return v;
  }
  uint64_t uvarlong() {
    uint64_t v = 0;
    const size_t n = codec::read_unsigned_varlong({data_ + pos_, end_ - pos_}, &v);
    if (n == 0) [[unlikely]] {
      fail("malformed or truncated varlong");
      return 0;
    }
    pos_ += n;
    return v;
  }
  int32_t varint() { return codec::zigzag_decode32(uvarint()); }
  int64_t varlong() { return codec::zigzag_decode64(uvarlong()); }

  // Length prefixes. Each returns -1 for null, and fails (returning -1) if
  // the length is negative other than -1 or exceeds the bytes left.
  int32_t string_length(bool compact);
  int32_t bytes_length(bool compact);
  // An array's element count; each element takes at least one byte... or
  // none, so the count is bounded by the bytes left, as Kafka bounds it.
  int32_t array_length(bool compact);

  std::string string_body(int32_t n);
  io::Buffer slice(size_t n);
  void skip(size_t n);

  std::string string(bool compact);
  std::optional<std::string> nullable_string(bool compact);
  io::Buffer bytes(bool compact);
  std::optional<io::Buffer> nullable_bytes(bool compact);

  // Tagged-field section helpers: the field's size prefix, then a sub-range.
  size_t end() const { return end_; }
  void set_end(size_t end) { end_ = end; }

 private:
  template <typename T>
  T fixed() {
    if (remaining() < sizeof(T)) [[unlikely]] {
      fail("truncated fixed-width field");
      pos_ = end_;
      return 0;
    }
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    v = byte_swap(v);
    return v;
  }

  const io::Buffer* frame_;
  const std::byte* data_;
  size_t pos_;
  size_t end_;
  size_t copied_ = 0;
  const char* error_ = nullptr;
  const char* error_field_ = nullptr;
  size_t error_pos_ = 0;
};

class Writer {
 public:
  // Output of `bytes` bytes, of which `zero_copy` arrive as spliced Buffers.
  explicit Writer(const Sizer& size);

  void i8(int8_t v) { u8(static_cast<uint8_t>(v)); }
  void u8(uint8_t v) { *p_++ = static_cast<std::byte>(v); }
  void i16(int16_t v) { fixed(static_cast<uint16_t>(v)); }
  void u16(uint16_t v) { fixed(v); }
  void i32(int32_t v) { fixed(static_cast<uint32_t>(v)); }
  void u32(uint32_t v) { fixed(v); }
  void i64(int64_t v) { fixed(static_cast<uint64_t>(v)); }
  void f64(double v) { fixed(std::bit_cast<uint64_t>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void uuid(const Uuid& v) { raw(v.bytes.data(), v.bytes.size()); }
  void uvarint(uint32_t v) { p_ += codec::encode_unsigned_varint(v, p_); }
  void uvarlong(uint64_t v) { p_ += codec::encode_unsigned_varlong(v, p_); }
  void varint(int32_t v) { p_ += codec::encode_varint(v, p_); }
  void varlong(int64_t v) { p_ += codec::encode_varlong(v, p_); }
  void raw(const void* data, size_t n) {
    if (n == 0) return;
    std::memcpy(p_, data, n);
    p_ += n;
  }

  void string_length(int32_t n, bool compact) {
    if (!compact && n > 0x7fff) fail("string longer than 32767 bytes");
    if (compact) {
      uvarint(static_cast<uint32_t>(n + 1));
    } else {
      i16(static_cast<int16_t>(n));
    }
  }
  void bytes_length(int32_t n, bool compact) {
    if (compact) {
      uvarint(static_cast<uint32_t>(n + 1));
    } else {
      i32(n);
    }
  }
  void array_length(int32_t n, bool compact) { bytes_length(n, compact); }

  void string(std::string_view s, bool compact) {
    string_length(static_cast<int32_t>(s.size()), compact);
    raw(s.data(), s.size());
  }
  void nullable_string(const std::optional<std::string>& s, bool compact) {
    if (!s) {
      string_length(-1, compact);
    } else {
      string(*s, compact);
    }
  }
  void bytes(const io::Buffer& b, bool compact) {
    bytes_length(static_cast<int32_t>(b.size()), compact);
    raw(b.data(), b.size());
  }
  void nullable_bytes(const std::optional<io::Buffer>& b, bool compact) {
    if (!b) {
      bytes_length(-1, compact);
    } else {
      bytes(*b, compact);
    }
  }
  // Length prefix, then the Buffer spliced in without copying.
  void zero_copy_bytes(const io::Buffer& b, bool compact);
  void nullable_zero_copy_bytes(const std::optional<io::Buffer>& b, bool compact) {
    if (!b) {
      bytes_length(-1, compact);
    } else {
      zero_copy_bytes(*b, compact);
    }
  }

  // Records the first encoding error (a value the version cannot carry).
  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }
  bool ok() const { return error_.empty(); }

  // The encoding. REQUIRES: exactly the sized bytes were written.
  absl::Status finish(io::BufferChain* out);
  size_t written() const;

 private:
  template <typename T>
  void fixed(T v) {
    v = byte_swap(v);
    std::memcpy(p_, &v, sizeof(T));
    p_ += sizeof(T);
  }

  io::Buffer storage_;
  std::byte* base_;
  std::byte* p_;
  size_t segment_start_ = 0;
  size_t spliced_ = 0;
  Sizer expected_;
  io::BufferChain chain_;
  std::string error_;
};

// Tagged fields the generated code does not know are written in ascending
// tag order, merged with the known ones.
inline void write_raw_tags_below(Writer& w, const RawTags& tags, size_t& next, uint32_t limit) {
  while (next < tags.size() && tags[next].tag < limit) {
    w.uvarint(tags[next].tag);
    w.uvarint(static_cast<uint32_t>(tags[next].data.size()));
    w.raw(tags[next].data.data(), tags[next].data.size());
    ++next;
  }
}
inline void write_raw_tags_rest(Writer& w, const RawTags& tags, size_t& next) {
  for (; next < tags.size(); ++next) {
    w.uvarint(tags[next].tag);
    w.uvarint(static_cast<uint32_t>(tags[next].data.size()));
    w.raw(tags[next].data.data(), tags[next].data.size());
  }
}
inline size_t raw_tags_size(const RawTags& tags) {
  size_t n = 0;
  for (const RawTag& t : tags) {
    n += uvarint_size(t.tag) + uvarint_size(static_cast<uint32_t>(t.data.size())) + t.data.size();
  }
  return n;
}

// --- text form ----------------------------------------------------------

namespace fmtdetail {
void append(std::string& out, bool v);
void append(std::string& out, int8_t v);
void append(std::string& out, int16_t v);
void append(std::string& out, int32_t v);
void append(std::string& out, int64_t v);
void append(std::string& out, uint16_t v);
void append(std::string& out, uint32_t v);
void append(std::string& out, double v);
void append(std::string& out, const std::string& v);
void append(std::string& out, const Uuid& v);
void append(std::string& out, const io::Buffer& v);
void append(std::string& out, const RawTags& v);
template <typename T>
void append(std::string& out, const std::optional<T>& v);
template <typename T>
void append(std::string& out, const std::vector<T>& v);
template <typename T>
  requires requires(const T& t, std::string& s) { t.append_to(s); }
void append(std::string& out, const T& v) {
  v.append_to(out);
}
template <typename T>
void append(std::string& out, const std::optional<T>& v) {
  if (!v) {
    out += "null";
  } else {
    append(out, *v);
  }
}
template <typename T>
void append(std::string& out, const std::vector<T>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ", ";
    append(out, v[i]);
  }
  out += ']';
}
}  // namespace fmtdetail

}  // namespace brook::net
