// core/controller/scram.cc
#include "core/controller/scram.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <utility>

#include "net/kafka/errors.h"
#include "net/kafka/scram.h"

namespace brook::controller {

namespace {

struct Problem {
  net::Error error;
  std::string message;
};

std::optional<Problem> check_name_and_mechanism(const std::string& name, int8_t mechanism) {
  if (name.empty()) return Problem{net::Error::kUnacceptableCredential, "Username must not be empty"};
  if (!net::scram_mechanism_of_type(mechanism).has_value()) {
    return Problem{net::Error::kUnsupportedSaslMechanism, "Unknown SCRAM mechanism"};
  }
  return std::nullopt;
}

bool exists(const metadata::ScramImage& image, int8_t mechanism, const std::string& name) {
  auto m = image.mechanisms.find(mechanism);
  return m != image.mechanisms.end() && m->second.contains(name);
}

}  // namespace

ScramChanges alter_scram_credentials(const metadata::ScramImage& image,
                                     const net::AlterUserScramCredentialsRequest& request) {
  using Key = std::pair<std::string, int8_t>;  // user, mechanism
  using Upsertion = net::AlterUserScramCredentialsRequest::ScramCredentialUpsertion;
  // Each (user, mechanism)'s one alteration: null for a deletion.
  std::map<Key, const Upsertion*> changes;
  std::set<Key> duplicates;
  // Per user, in the order users first appear: its first problem.
  std::vector<std::string> order;
  std::map<std::string, Problem> problems;
  const auto note = [&](const std::string& name, std::optional<Problem> problem) {
    if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
    if (problem.has_value()) problems.emplace(name, std::move(*problem));
  };
  const auto add = [&](const Key& key, const Upsertion* change) {
    if (!changes.emplace(key, change).second) duplicates.insert(key);
  };
  for (const auto& d : request.deletions) {
    std::optional<Problem> problem = check_name_and_mechanism(d.name, d.mechanism);
    if (!problem.has_value() && !exists(image, d.mechanism, d.name)) {
      problem = Problem{net::Error::kResourceNotFound, "Attempt to delete a user credential that does not exist"};
    }
    note(d.name, std::move(problem));
    add(Key(d.name, d.mechanism), nullptr);
  }
  for (const auto& u : request.upsertions) {
    std::optional<Problem> problem = check_name_and_mechanism(u.name, u.mechanism);
    if (!problem.has_value() && u.iterations < net::kScramMinIterations) {
      problem = Problem{net::Error::kUnacceptableCredential, "Too few iterations"};
    } else if (!problem.has_value() && u.iterations > net::kScramMaxIterations) {
      problem = Problem{net::Error::kUnacceptableCredential, "Too many iterations"};
    }
    note(u.name, std::move(problem));
    add(Key(u.name, u.mechanism), &u);
  }
  for (const Key& key : duplicates) {
    // A duplicate outranks the user's other problems, as in Kafka.
    problems.insert_or_assign(key.first,
                              Problem{net::Error::kDuplicateResource,
                                      "A user credential cannot be altered twice in the same request"});
  }
  ScramChanges out;
  for (const std::string& name : order) {
    net::AlterUserScramCredentialsResponse::AlterUserScramCredentialsResult result;
    result.user = name;
    result.error_message = std::nullopt;
    if (auto p = problems.find(name); p != problems.end()) {
      // None of a failing user's alterations is made.
      result.error_code = net::code(p->second.error);
      result.error_message = p->second.message;
      out.response.results.push_back(std::move(result));
      continue;
    }
    for (auto it = changes.lower_bound(Key(name, INT8_MIN)); it != changes.end() && it->first.first == name; ++it) {
      const Upsertion* u = it->second;
      if (u == nullptr) {
        net::RemoveUserScramCredentialRecord record;
        record.name = name;
        record.mechanism = it->first.second;
        out.records.emplace_back(std::move(record));
        continue;
      }
      // The user has no problem, so its mechanism is known.
      const net::ScramCredential c = net::scram_credential_from_salted(
          *net::scram_mechanism_of_type(u->mechanism), u->salted_password.view(), u->salt.view(), u->iterations);
      net::UserScramCredentialRecord record;
      record.name = name;
      record.mechanism = it->first.second;
      record.salt = io::Buffer::copy_of(std::string_view(c.salt));
      record.stored_key = io::Buffer::copy_of(std::string_view(c.stored_key));
      record.server_key = io::Buffer::copy_of(std::string_view(c.server_key));
      record.iterations = c.iterations;
      out.records.emplace_back(std::move(record));
    }
    out.written.push_back(out.response.results.size());
    out.response.results.push_back(std::move(result));
  }
  return out;
}

net::DescribeUserScramCredentialsResponse describe_scram_credentials(
    const metadata::ScramImage& image, const net::DescribeUserScramCredentialsRequest& request) {
  net::DescribeUserScramCredentialsResponse response;
  response.error_message = std::nullopt;
  // User -> named more than once; in name order.
  std::map<std::string, bool> users;
  if (!request.users.has_value() || request.users->empty()) {
    for (const auto& [mechanism, by_user] : image.mechanisms) {
      for (const auto& [name, c] : by_user) users.emplace(name, false);
    }
  } else {
    for (const auto& u : *request.users) {
      auto [it, added] = users.emplace(u.name, false);
      if (!added) it->second = true;
    }
  }
  for (const auto& [name, duplicate] : users) {
    auto& result = response.results.emplace_back();
    result.user = name;
    result.error_message = std::nullopt;
    if (duplicate) {
      result.error_code = net::code(net::Error::kDuplicateResource);
      result.error_message = "Cannot describe SCRAM credentials for the same user twice in a single request: " + name;
      continue;
    }
    for (const auto& [mechanism, by_user] : image.mechanisms) {
      auto c = by_user.find(name);
      if (c == by_user.end()) continue;
      auto& info = result.credential_infos.emplace_back();
      info.mechanism = mechanism;
      info.iterations = c->second.iterations;
    }
    if (result.credential_infos.empty()) {
      result.error_code = net::code(net::Error::kResourceNotFound);
      result.error_message = "Attempt to describe a user credential that does not exist: " + name;
    }
  }
  return response;
}

}  // namespace brook::controller
