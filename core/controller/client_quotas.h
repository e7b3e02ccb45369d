// core/controller/client_quotas.h
//
// The checks Kafka's controller applies to AlterClientQuotas
// (ClientQuotaControlManager): an entity names "user" and/or "client-id",
// or "ip" alone, each at most once (a null name is the type's default
// entity; an ip name must be an IP address); the keys are the quotas of
// the entity's kind, with integral values where the quota is an integer.
// Every failure is INVALID_REQUEST with Kafka's message.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/metadata/image.h"
#include "net/kafka/messages/describe_client_quotas_request.h"
#include "net/kafka/messages/describe_client_quotas_response.h"

namespace brook::controller {

// The entity of a request, as (type, name) pairs in request order.
using QuotaEntityList = std::vector<std::pair<std::string, std::optional<std::string>>>;

// The entity, or why it is invalid.
std::variant<metadata::ClientQuotaEntity, std::string> check_quota_entity(const QuotaEntityList& entity);
// Why setting `key` to `value` on `entity` is invalid, if it is.
std::optional<std::string> check_quota_value(const metadata::ClientQuotaEntity& entity, const std::string& key,
                                             double value);

// The answer to DescribeClientQuotas from `quotas` (Kafka's
// ClientQuotasImage.describe): each component names an entity type ("user",
// "client-id" or "ip", once each; "ip" with no other) matched exactly
// (match type 0, a name), at its default entity (1, no name) or with any
// name, the default included (2); an entity must have every type named
// and, when `strict`, no other. No component matches every entity unless
// strict. A bad filter is INVALID_REQUEST (an unknown entity type
// UNSUPPORTED_VERSION) with null entries.
net::DescribeClientQuotasResponse describe_client_quotas(const metadata::ClientQuotasImage& quotas,
                                                         const net::DescribeClientQuotasRequest& request);

}  // namespace brook::controller
