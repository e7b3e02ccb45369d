// core/controller/client_quotas.cc
#include "core/controller/client_quotas.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string_view>

namespace brook::controller {

namespace {

enum class QuotaType { kLong, kInt, kDouble };

std::optional<QuotaType> quota_type(bool ip, std::string_view key) {
  if (ip) {
    if (key == "connection_creation_rate") return QuotaType::kInt;
    return std::nullopt;
  }
  if (key == "producer_byte_rate" || key == "consumer_byte_rate") return QuotaType::kLong;
  if (key == "request_percentage" || key == "controller_mutation_rate") return QuotaType::kDouble;
  return std::nullopt;
}

bool is_ip_address(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

}  // namespace

std::variant<metadata::ClientQuotaEntity, std::string> check_quota_entity(const QuotaEntityList& entity) {
  if (entity.empty()) return std::string("Invalid empty client quota entity");
  metadata::ClientQuotaEntity out;
  for (const auto& [type, name] : entity) {
    if (type != "user" && type != "client-id" && type != "ip") {
      return fmt::format("Unhandled client quota entity type: {}", type);
    }
    if (!out.emplace(type, name).second) {
      return fmt::format("Invalid empty client quota entity: duplicate entity entry type {}", type);
    }
    if (type == "ip" && name.has_value() && !is_ip_address(*name)) {
      return fmt::format("{} is not a valid IP or resolvable host.", *name);
    }
  }
  if (out.contains("ip") && out.size() > 1) {
    return std::string(
        "Invalid quota entity combination, IP entity should not be combined with User or ClientId entity.");
  }
  return out;
}

std::optional<std::string> check_quota_value(const metadata::ClientQuotaEntity& entity, const std::string& key,
                                             double value) {
  const std::optional<QuotaType> type = quota_type(entity.contains("ip"), key);
  if (!type.has_value()) return fmt::format("Invalid configuration key {}", key);
  if (!std::isfinite(value)) return fmt::format("Configuration {} must be a finite number", key);
  switch (*type) {
    case QuotaType::kLong:
      if (value != std::floor(value) || std::fabs(value) >= 9.2e18) {
        return fmt::format("Configuration {} must be a Long value", key);
      }
      break;
    case QuotaType::kInt:
      if (value != std::floor(value) || value > std::numeric_limits<int32_t>::max() ||
          value < std::numeric_limits<int32_t>::min()) {
        return fmt::format("Configuration {} must be an Integer value", key);
      }
      break;
    case QuotaType::kDouble:
      break;
  }
  return std::nullopt;
}

}  // namespace brook::controller
