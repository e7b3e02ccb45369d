// tools/json.h
//
// A small JSON reader for the tools' input files (a reassignment plan):
// objects, arrays, strings (with \-escapes, \u of the Basic Multilingual
// Plane as UTF-8), integers and other numbers, true, false and null. Depth
// is bounded; anything malformed is an InvalidArgument with its offset.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace brook::tools {

struct JsonValue {
  enum class Kind : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  std::string text;  // a string's value, or a number as written
  std::vector<JsonValue> items;
  std::map<std::string, JsonValue> fields;  // (a repeated key: the last one)

  // The member `key` of an object, if any.
  const JsonValue* field(std::string_view key) const;
  // A number that is an integer (no fraction or exponent) within int64.
  std::optional<int64_t> integer() const;
};

absl::StatusOr<JsonValue> parse_json(std::string_view text);

}  // namespace brook::tools
