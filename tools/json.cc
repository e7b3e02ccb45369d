// tools/json.cc
#include "tools/json.h"

#include <fmt/format.h>

#include <charconv>

namespace brook::tools {

namespace {

constexpr int kMaxDepth = 64;

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  absl::StatusOr<JsonValue> document() {
    absl::StatusOr<JsonValue> v = value(0);
    if (!v.ok()) return v;
    skip_space();
    if (pos_ != text_.size()) return error("text after the value");
    return v;
  }

 private:
  absl::Status error(std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("JSON: {} at offset {}", what, pos_));
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool take(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  absl::StatusOr<JsonValue> value(int depth) {
    if (depth > kMaxDepth) return error("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) return error("a value expected");
    JsonValue v;
    const char c = text_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') {
      absl::StatusOr<std::string> s = string();
      if (!s.ok()) return s.status();
      v.kind = JsonValue::Kind::kString;
      v.text = *std::move(s);
      return v;
    }
    if (take("true") || take("false")) {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = text_[pos_ - 4] == 't';
      return v;
    }
    if (take("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) return number();
    return error(fmt::format("unexpected '{}'", c));
  }

  absl::StatusOr<JsonValue> number() {
    const size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ > from;
    };
    if (!digits()) return error("a digit expected");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (!digits()) return error("a digit expected after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digits()) return error("a digit expected in the exponent");
    }
    JsonValue v;
    v.kind = JsonValue::Kind::kNumber;
    v.text = std::string(text_.substr(start, pos_ - start));
    return v;
  }

  absl::StatusOr<std::string> string() {
    ++pos_;  // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) return error("an unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) return error("a control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return error("an unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          if (pos_ + 4 > text_.size()) return error("a short \\u escape");
          unsigned code = 0;
          auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + pos_ + 4, code, 16);
          if (ec != std::errc() || end != text_.data() + pos_ + 4) return error("a bad \\u escape");
          pos_ += 4;
          if (code >= 0xd800 && code <= 0xdfff) return error("a surrogate \\u escape");
          if (code < 0x80) {
            out.push_back(static_cast<char>(code));
          } else if (code < 0x800) {
            out.push_back(static_cast<char>(0xc0 | (code >> 6)));
            out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
          } else {
            out.push_back(static_cast<char>(0xe0 | (code >> 12)));
            out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3f)));
            out.push_back(static_cast<char>(0x80 | (code & 0x3f)));
          }
          break;
        }
        default:
          return error(fmt::format("a bad escape '\\{}'", e));
      }
    }
  }

  absl::StatusOr<JsonValue> array(int depth) {
    ++pos_;
    JsonValue v;
    v.kind = JsonValue::Kind::kArray;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return v;
    }
    while (true) {
      absl::StatusOr<JsonValue> item = value(depth + 1);
      if (!item.ok()) return item;
      v.items.push_back(*std::move(item));
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return v;
      }
      return error("',' or ']' expected");
    }
  }

  absl::StatusOr<JsonValue> object(int depth) {
    ++pos_;
    JsonValue v;
    v.kind = JsonValue::Kind::kObject;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return v;
    }
    while (true) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') return error("a member name expected");
      absl::StatusOr<std::string> key = string();
      if (!key.ok()) return key.status();
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != ':') return error("':' expected");
      ++pos_;
      absl::StatusOr<JsonValue> item = value(depth + 1);
      if (!item.ok()) return item;
      v.fields.insert_or_assign(*std::move(key), *std::move(item));
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return v;
      }
      return error("',' or '}' expected");
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::field(std::string_view key) const {
  if (kind != Kind::kObject) return nullptr;
  auto it = fields.find(std::string(key));
  return it == fields.end() ? nullptr : &it->second;
}

std::optional<int64_t> JsonValue::integer() const {
  if (kind != Kind::kNumber) return std::nullopt;
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

absl::StatusOr<JsonValue> parse_json(std::string_view text) { return Reader(text).document(); }

}  // namespace brook::tools
