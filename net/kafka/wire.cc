// net/kafka/wire.cc
#include "net/kafka/wire.h"

#include <fmt/format.h>

namespace brook::net {

Uuid random_uuid(io::Random& random) {
  while (true) {
    Uuid id;
    const uint64_t high = random.next_u64();
    const uint64_t low = random.next_u64();
    for (size_t i = 0; i < 8; ++i) {
      id.bytes[i] = static_cast<uint8_t>(high >> (56 - 8 * i));
      id.bytes[8 + i] = static_cast<uint8_t>(low >> (56 - 8 * i));
    }
    // The first character is the top 6 bits; '-' is 62.
    const bool starts_with_dash = (id.bytes[0] >> 2) == 62;
    const bool metadata_topic_id = high == 0 && low == 1;
    if (!id.is_zero() && !metadata_topic_id && !starts_with_dash) return id;
  }
}

std::string Uuid::to_string() const {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve(22);
  uint32_t acc = 0;
  int bits = 0;
  for (uint8_t b : bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(acc >> bits) & 0x3f];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 0x3f];
  return out;
}

// --- Reader ---------------------------------------------------------------

absl::Status Reader::status() const {
  if (error_ == nullptr) return absl::OkStatus();
  if (error_field_ != nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("{} ({}) at byte {}", error_, error_field_, error_pos_));
  }
  return absl::InvalidArgumentError(fmt::format("{} at byte {}", error_, error_pos_));
}

void Reader::fail(const char* what) {
  if (error_ != nullptr) return;
  error_ = what;
  error_pos_ = pos_;
  pos_ = end_;
}

void Reader::fail_field(const char* what, const char* field) {
  if (error_ != nullptr) return;
  fail(what);
  error_field_ = field;
}

Uuid Reader::uuid() {
  Uuid u;
  if (remaining() < 16) {
    fail("truncated uuid");
    return u;
  }
  std::memcpy(u.bytes.data(), data_ + pos_, 16);
  pos_ += 16;
  return u;
}

namespace {

// A length prefix: an unsigned varint holding length + 1 when compact, else
// a signed int16 or int32. -1 is null; anything else negative, or longer
// than the bytes left, fails the read (and yields -1).
struct LengthKind {
  bool wide;  // int32 when not compact (bytes, arrays), else int16 (strings)
  const char* negative;
  const char* too_long;
};

int32_t read_length(Reader& r, bool compact, const LengthKind& kind) {
  int64_t n;
  if (compact) {
    n = static_cast<int64_t>(r.uvarint()) - 1;
  } else {
    n = kind.wide ? r.i32() : r.i16();
  }
  if (!r.ok()) return -1;
  if (n < -1) {
    r.fail(kind.negative);
    return -1;
  }
  if (n > static_cast<int64_t>(r.remaining())) {
    r.fail(kind.too_long);
    return -1;
  }
  return static_cast<int32_t>(n);
}

constexpr LengthKind kString{false, "negative string length", "string length exceeds the frame"};
constexpr LengthKind kBytes{true, "negative length", "length exceeds the frame"};
constexpr LengthKind kArray{true, "negative array length", "array length exceeds the frame"};

}  // namespace

int32_t Reader::string_length(bool compact) { return read_length(*this, compact, kString); }
int32_t Reader::bytes_length(bool compact) { return read_length(*this, compact, kBytes); }
int32_t Reader::array_length(bool compact) { return read_length(*this, compact, kArray); }

std::string Reader::string_body(int32_t n) {
  if (n <= 0) return {};
  std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  copied_ += static_cast<size_t>(n);
  return s;
}

io::Buffer Reader::slice(size_t n) {
  if (n > remaining()) {
    fail("truncated bytes");
    return {};
  }
  io::Buffer b = frame_->slice(pos_, n);
  pos_ += n;
  return b;
}

void Reader::skip(size_t n) {
  if (n > remaining()) {
    fail("truncated field");
    return;
  }
  pos_ += n;
}

std::string Reader::string(bool compact) {
  const int32_t n = string_length(compact);
  if (n < 0) {
    if (ok()) fail("null value for a non-nullable string");
    return {};
  }
  return string_body(n);
}

std::optional<std::string> Reader::nullable_string(bool compact) {
  const int32_t n = string_length(compact);
  if (n < 0) return std::nullopt;
  return string_body(n);
}

io::Buffer Reader::bytes(bool compact) {
  const int32_t n = bytes_length(compact);
  if (n < 0) {
    if (ok()) fail("null value for non-nullable bytes");
    return {};
  }
  return slice(static_cast<size_t>(n));
}

std::optional<io::Buffer> Reader::nullable_bytes(bool compact) {
  const int32_t n = bytes_length(compact);
  if (n < 0) return std::nullopt;
  return slice(static_cast<size_t>(n));
}

// --- Writer ---------------------------------------------------------------

Writer::Writer(const Sizer& size) : expected_(size) {
  storage_ = io::Buffer::allocate(size.bytes - size.zero_copy);
  base_ = storage_.mutable_data();
  p_ = base_;
}

size_t Writer::written() const { return static_cast<size_t>(p_ - base_) + spliced_; }

void Writer::zero_copy_bytes(const io::Buffer& b, bool compact) {
  bytes_length(static_cast<int32_t>(b.size()), compact);
  if (b.empty()) return;
  const size_t pos = static_cast<size_t>(p_ - base_);
  chain_.append(storage_.slice(segment_start_, pos - segment_start_));
  chain_.append(b);
  segment_start_ = pos;
  spliced_ += b.size();
}

absl::Status Writer::finish(io::BufferChain* out) {
  if (!error_.empty()) return absl::InvalidArgumentError(error_);
  const size_t pos = static_cast<size_t>(p_ - base_);
  BROOK_ASSERT_EQ(pos + spliced_, expected_.bytes);
  BROOK_ASSERT_EQ(spliced_, expected_.zero_copy);
  chain_.append(storage_.slice(segment_start_, pos - segment_start_));
  *out = std::move(chain_);
  return absl::OkStatus();
}

// --- text form ----------------------------------------------------------

namespace fmtdetail {
void append(std::string& out, bool v) { out += v ? "true" : "false"; }
void append(std::string& out, int8_t v) { fmt::format_to(std::back_inserter(out), "{}", v); }
void append(std::string& out, int16_t v) { fmt::format_to(std::back_inserter(out), "{}", v); }
void append(std::string& out, int32_t v) { fmt::format_to(std::back_inserter(out), "{}", v); }
void append(std::string& out, int64_t v) { fmt::format_to(std::back_inserter(out), "{}", v); }
void append(std::string& out, uint16_t v) { fmt::format_to(std::back_inserter(out), "{}", v); }
void append(std::string& out, uint32_t v) { fmt::format_to(std::back_inserter(out), "{}", v); }
void append(std::string& out, double v) { fmt::format_to(std::back_inserter(out), "{}", v); }
void append(std::string& out, const std::string& v) {
  out += '\'';
  out += v;
  out += '\'';
}
void append(std::string& out, const Uuid& v) { out += v.to_string(); }
void append(std::string& out, const io::Buffer& v) {
  fmt::format_to(std::back_inserter(out), "<{} bytes>", v.size());
}
void append(std::string& out, const RawTags& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ", ";
    fmt::format_to(std::back_inserter(out), "tag {}: {} bytes", v[i].tag, v[i].data.size());
  }
  out += ']';
}
}  // namespace fmtdetail

}  // namespace brook::net
