// raft/quorum_state.cc
#include "raft/quorum_state.h"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <memory>
#include <variant>

#include "io/status.h"
#include "storage/checkpoint.h"

namespace brook::raft {

namespace {

constexpr size_t kQuorumStateBytesMax = 1 << 20;
constexpr int kDepthMax = 8;

// Just enough JSON for the quorum-state document: objects, arrays, strings,
// integers, booleans and null. Anything else is an error.
struct Json;
using JsonObject = std::map<std::string, Json, std::less<>>;
using JsonArray = std::vector<Json>;
struct Json {
  std::variant<std::monostate, bool, int64_t, std::string, std::shared_ptr<JsonArray>,
               std::shared_ptr<JsonObject>>
      value;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  absl::StatusOr<Json> document() {
    ASSIGN_OR_RETURN(Json v, value(0));
    skip_space();
    if (pos_ != text_.size()) return error("trailing characters");
    return v;
  }

 private:
  absl::Status error(std::string_view what) const {
    return absl::DataLossError(fmt::format("quorum-state: {} at byte {}", what, pos_));
  }
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool eat_word(std::string_view w) {
    if (text_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  absl::StatusOr<Json> value(int depth) {
    if (depth > kDepthMax) return error("nesting too deep");
    skip_space();
    if (pos_ >= text_.size()) return error("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') {
      ASSIGN_OR_RETURN(std::string s, string());
      return Json{std::move(s)};
    }
    if (eat_word("true")) return Json{true};
    if (eat_word("false")) return Json{false};
    if (eat_word("null")) return Json{};
    if (c == '-' || (c >= '0' && c <= '9')) {
      int64_t n = 0;
      const char* begin = text_.data() + pos_;
      const char* end = text_.data() + text_.size();
      auto [p, ec] = std::from_chars(begin, end, n);
      if (ec != std::errc()) return error("bad number");
      if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return error("not an integer");
      pos_ += static_cast<size_t>(p - begin);
      return Json{n};
    }
    return error("unexpected character");
  }

  absl::StatusOr<std::string> string() {
    if (!eat('"')) return error("expected a string");
    std::string out;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) return error("control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) break;
      const char e = text_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out.push_back(e); break;
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        default: return error("unsupported escape");
      }
    }
    return error("unterminated string");
  }

  absl::StatusOr<Json> array(int depth) {
    eat('[');
    auto out = std::make_shared<JsonArray>();
    if (eat(']')) return Json{out};
    while (true) {
      ASSIGN_OR_RETURN(Json v, value(depth + 1));
      out->push_back(std::move(v));
      if (eat(']')) return Json{out};
      if (!eat(',')) return error("expected ',' or ']'");
    }
  }

  absl::StatusOr<Json> object(int depth) {
    eat('{');
    auto out = std::make_shared<JsonObject>();
    if (eat('}')) return Json{out};
    while (true) {
      skip_space();
      ASSIGN_OR_RETURN(std::string key, string());
      if (!eat(':')) return error("expected ':'");
      ASSIGN_OR_RETURN(Json v, value(depth + 1));
      if (!out->emplace(std::move(key), std::move(v)).second) return error("duplicate key");
      if (eat('}')) return Json{out};
      if (!eat(',')) return error("expected ',' or '}'");
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

absl::StatusOr<int32_t> int32_field(const JsonObject& o, std::string_view name) {
  auto it = o.find(name);
  if (it == o.end()) return absl::DataLossError(fmt::format("quorum-state: no \"{}\"", name));
  const int64_t* n = std::get_if<int64_t>(&it->second.value);
  if (n == nullptr || *n < INT32_MIN || *n > INT32_MAX) {
    return absl::DataLossError(fmt::format("quorum-state: \"{}\" is not an int32", name));
  }
  return static_cast<int32_t>(*n);
}

}  // namespace

std::string encode_quorum_state(const ElectionState& state) {
  std::string voters;
  for (int32_t v : state.voters) {
    if (!voters.empty()) voters += ',';
    voters += fmt::format("{{\"voterId\":{}}}", v);
  }
  return fmt::format(
      "{{\"clusterId\":\"\",\"leaderId\":{},\"leaderEpoch\":{},\"votedId\":{},\"appliedOffset\":0,"
      "\"currentVoters\":[{}],\"data_version\":0}}",
      state.leader_id, state.epoch, state.voted_id, voters);
}

absl::StatusOr<ElectionState> decode_quorum_state(std::string_view text) {
  ASSIGN_OR_RETURN(Json doc, Parser(text).document());
  auto* obj = std::get_if<std::shared_ptr<JsonObject>>(&doc.value);
  if (obj == nullptr) return absl::DataLossError("quorum-state: not a JSON object");
  const JsonObject& o = **obj;
  ASSIGN_OR_RETURN(int32_t version, int32_field(o, "data_version"));
  if (version != 0 && version != 1) {
    return absl::DataLossError(fmt::format("quorum-state: unknown data_version {}", version));
  }
  ElectionState s;
  ASSIGN_OR_RETURN(s.leader_id, int32_field(o, "leaderId"));
  ASSIGN_OR_RETURN(s.epoch, int32_field(o, "leaderEpoch"));
  ASSIGN_OR_RETURN(s.voted_id, int32_field(o, "votedId"));
  if (s.epoch < 0) s.epoch = 0;
  if (version == 0) {
    auto it = o.find("currentVoters");
    if (it != o.end()) {
      if (auto* list = std::get_if<std::shared_ptr<JsonArray>>(&it->second.value)) {
        for (const Json& v : **list) {
          auto* voter = std::get_if<std::shared_ptr<JsonObject>>(&v.value);
          if (voter == nullptr) return absl::DataLossError("quorum-state: bad currentVoters entry");
          ASSIGN_OR_RETURN(int32_t id, int32_field(**voter, "voterId"));
          s.voters.push_back(id);
        }
      } else if (!std::holds_alternative<std::monostate>(it->second.value)) {
        return absl::DataLossError("quorum-state: currentVoters is not a list");
      }
    }
  }
  return s;
}

std::string quorum_state_path(std::string_view dir) {
  return dir.empty() ? std::string("quorum-state") : fmt::format("{}/quorum-state", dir);
}

io::Task<absl::StatusOr<std::optional<ElectionState>>> read_quorum_state(io::Disk& disk,
                                                                         std::string dir) {
  const std::string path = quorum_state_path(dir);
  CO_ASSIGN_OR_RETURN(std::optional<io::Buffer> bytes,
                      co_await storage::read_whole_file_agreed(disk, path, kQuorumStateBytesMax));
  if (!bytes.has_value()) co_return std::nullopt;
  CO_ASSIGN_OR_RETURN(ElectionState state, decode_quorum_state(bytes->view()));
  co_return std::optional<ElectionState>(std::move(state));
}

io::Task<absl::Status> write_quorum_state(io::Disk& disk, std::string dir, ElectionState state) {
  co_return co_await storage::write_file_atomically(disk, quorum_state_path(dir),
                                                    io::Buffer::copy_of(encode_quorum_state(state)));
}

}  // namespace brook::raft
