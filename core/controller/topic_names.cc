// core/controller/topic_names.cc
#include "core/controller/topic_names.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/controller/quorum_controller.h"

namespace brook::controller {

namespace {

bool legal_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Whether a and b differ only where one has '.' and the other '_'.
bool collide(std::string_view a, std::string_view b) {
  if (a.size() != b.size() || a == b) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const char x = a[i] == '.' ? '_' : a[i];
    const char y = b[i] == '.' ? '_' : b[i];
    if (x != y) return false;
  }
  return true;
}

}  // namespace

absl::Status validate_topic_name(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("Topic name is illegal, it can't be empty");
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError("Topic name cannot be \".\" or \"..\"");
  }
  if (name.size() > kTopicNameMax) {
    return absl::InvalidArgumentError(fmt::format(
        "Topic name is illegal, it can't be longer than {} characters, topic name: {}", kTopicNameMax,
        std::string(name)));
  }
  if (!std::all_of(name.begin(), name.end(), legal_char)) {
    return absl::InvalidArgumentError(
        fmt::format("Topic name \"{}\" is illegal, it contains a character other than ASCII "
                    "alphanumerics, '.', '_' and '-'",
                    std::string(name)));
  }
  return absl::OkStatus();
}

std::optional<std::string> colliding_topic(std::string_view name, const metadata::TopicsImage& topics,
                                           const std::set<std::string, std::less<>>& more) {
  if (name.find_first_of("._") == std::string_view::npos) return std::nullopt;
  for (const auto& [existing, id] : topics.by_name) {
    if (collide(existing, name)) return existing;
  }
  for (const std::string& existing : more) {
    if (collide(existing, name)) return existing;
  }
  return std::nullopt;
}

}  // namespace brook::controller
