// net/kafka/sasl.cc
#include "net/kafka/sasl.h"

#include <cctype>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "io/status.h"
#include "net/kafka/errors.h"
#include "net/kafka/messages/sasl_authenticate_request.h"
#include "net/kafka/messages/sasl_authenticate_response.h"
#include "net/kafka/messages/sasl_handshake_request.h"
#include "net/kafka/messages/sasl_handshake_response.h"

namespace brook::net {

namespace {

constexpr std::string_view kUserPrefix = "user_";

// Splits a JAAS entry into words: bare words, `=`, `;`, and double-quoted
// strings (backslash escapes the next character).
absl::StatusOr<std::vector<std::pair<std::string, bool>>> jaas_words(std::string_view text) {
  std::vector<std::pair<std::string, bool>> out;  // (word, quoted)
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '=' || c == ';') {
      out.emplace_back(std::string(1, c), false);
      ++i;
    } else if (c == '"') {
      std::string word;
      ++i;
      bool closed = false;
      while (i < text.size()) {
        if (text[i] == '\\' && i + 1 < text.size()) {
          word.push_back(text[i + 1]);
          i += 2;
        } else if (text[i] == '"') {
          closed = true;
          ++i;
          break;
        } else {
          word.push_back(text[i++]);
        }
      }
      if (!closed) return absl::InvalidArgumentError("JAAS configuration: a quoted value is not closed");
      out.emplace_back(std::move(word), true);
    } else {
      std::string word;
      while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])) && text[i] != '=' &&
             text[i] != ';' && text[i] != '"') {
        word.push_back(text[i++]);
      }
      out.emplace_back(std::move(word), false);
    }
  }
  return out;
}

template <typename M>
SaslServerSession::Step answer(const M& body, const RequestHeader& header, bool close) {
  SaslServerSession::Step step;
  absl::StatusOr<io::BufferChain> encoded = encode_response(body, header);
  if (encoded.ok()) step.response = std::move(*encoded);
  step.close = close || !encoded.ok();
  return step;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> parse_jaas_options(std::string_view jaas,
                                                                      std::string_view login_module) {
  ASSIGN_OR_RETURN(auto words, jaas_words(jaas));
  if (words.size() < 3 || words[0].second || words[1].second) {
    return absl::InvalidArgumentError("JAAS configuration: expected '<LoginModule> required <options>;'");
  }
  if (words[0].first != login_module) {
    return absl::InvalidArgumentError(
        fmt::format("JAAS configuration: login module {} is not {}", words[0].first, login_module));
  }
  const std::string& flag = words[1].first;
  if (flag != "required" && flag != "requisite" && flag != "sufficient" && flag != "optional") {
    return absl::InvalidArgumentError(fmt::format("JAAS configuration: unknown control flag '{}'", flag));
  }
  std::map<std::string, std::string> options;
  size_t i = 2;
  while (i < words.size() && !(words[i].first == ";" && !words[i].second)) {
    if (i + 2 >= words.size() || words[i + 1].first != "=" || words[i + 1].second) {
      return absl::InvalidArgumentError(
          fmt::format("JAAS configuration: expected key=\"value\" at '{}'", words[i].first));
    }
    options[words[i].first] = words[i + 2].first;
    i += 3;
  }
  if (i >= words.size()) return absl::InvalidArgumentError("JAAS configuration: the entry does not end with ';'");
  if (i + 1 != words.size()) {
    return absl::InvalidArgumentError("JAAS configuration: one login module entry is expected");
  }
  return options;
}

absl::StatusOr<SaslPlainUsers> parse_plain_jaas(std::string_view jaas) {
  ASSIGN_OR_RETURN(auto options, parse_jaas_options(jaas, kPlainLoginModule));
  SaslPlainUsers users;
  for (const auto& [key, value] : options) {
    if (key.starts_with(kUserPrefix) && key.size() > kUserPrefix.size()) {
      users.passwords[key.substr(kUserPrefix.size())] = value;
    }
  }
  if (users.passwords.empty()) {
    return absl::InvalidArgumentError("JAAS configuration: no user_NAME=\"PASSWORD\" entries (no user could log in)");
  }
  return users;
}

absl::StatusOr<SaslCredentials> parse_plain_jaas_credentials(std::string_view jaas) {
  return parse_jaas_credentials(jaas, kSaslPlain);
}

absl::StatusOr<SaslCredentials> parse_jaas_credentials(std::string_view jaas, std::string_view mechanism) {
  ASSIGN_OR_RETURN(auto options,
                   parse_jaas_options(jaas, mechanism == kSaslPlain ? kPlainLoginModule : kScramLoginModule));
  auto username = options.find("username");
  auto password = options.find("password");
  if (username == options.end() || password == options.end()) {
    return absl::InvalidArgumentError("JAAS configuration: no username=\"...\" password=\"...\" options");
  }
  return SaslCredentials{username->second, password->second, std::string(mechanism)};
}

bool SaslServerConfig::enabled(std::string_view mechanism) const {
  for (const std::string& m : mechanisms) {
    if (m == mechanism) return true;
  }
  return false;
}

absl::StatusOr<std::string> check_plain_token(const SaslPlainUsers& users, std::string_view token) {
  const size_t first = token.find('\0');
  const size_t second = first == std::string_view::npos ? first : token.find('\0', first + 1);
  if (second == std::string_view::npos || token.find('\0', second + 1) != std::string_view::npos) {
    return absl::InvalidArgumentError("Invalid SASL/PLAIN response: expected 3 tokens");
  }
  const std::string_view authzid = token.substr(0, first);
  const std::string_view user = token.substr(first + 1, second - first - 1);
  const std::string_view password = token.substr(second + 1);
  if (user.empty()) return absl::InvalidArgumentError("Authentication failed: username not specified");
  if (password.empty()) return absl::InvalidArgumentError("Authentication failed: password not specified");
  auto it = users.passwords.find(std::string(user));
  if (it == users.passwords.end() || it->second != password) {
    return absl::UnauthenticatedError("Authentication failed: Invalid username or password");
  }
  if (!authzid.empty() && authzid != user) {
    return absl::PermissionDeniedError("Authentication failed: Client requested an authorization id that is "
                                       "different from username");
  }
  return std::string(user);
}

SaslServerSession::Step SaslServerSession::on_request(const RequestFrame& frame) {
  switch (frame.header.request_api_key) {
    case SaslHandshakeRequest::kApiKey:
      return on_handshake(frame);
    case SaslAuthenticateRequest::kApiKey:
      return on_authenticate(frame);
    default:
      return Step{std::nullopt, true};
  }
}

SaslServerSession::Step SaslServerSession::on_handshake(const RequestFrame& frame) {
  absl::StatusOr<SaslHandshakeRequest> request = decode_body<SaslHandshakeRequest>(frame);
  if (!request.ok()) return Step{std::nullopt, true};
  SaslHandshakeResponse response;
  response.mechanisms = config_->mechanisms;
  if (state_ != State::kHandshake) {
    response.error_code = code(Error::kIllegalSaslState);
    return answer(response, frame.header, true);
  }
  if (!config_->enabled(request->mechanism)) {
    response.error_code = code(Error::kUnsupportedSaslMechanism);
    return answer(response, frame.header, true);
  }
  if (std::optional<ScramMechanism> scram = scram_mechanism(request->mechanism)) {
    scram_.emplace(*scram, config_->scram, config_->random);
  }
  state_ = frame.header.request_api_version == 0 ? State::kBareToken : State::kAuthenticate;
  return answer(response, frame.header, false);
}

SaslServerSession::Step SaslServerSession::on_authenticate(const RequestFrame& frame) {
  absl::StatusOr<SaslAuthenticateRequest> request = decode_body<SaslAuthenticateRequest>(frame);
  if (!request.ok()) return Step{std::nullopt, true};
  SaslAuthenticateResponse response;
  if (state_ != State::kAuthenticate) {
    response.error_code = code(Error::kIllegalSaslState);
    response.error_message = "SaslAuthenticate before a SaslHandshake v1 naming the mechanism";
    return answer(response, frame.header, true);
  }
  absl::StatusOr<std::string> token = on_token(request->auth_bytes.view());
  if (!token.ok()) {
    response.error_code = code(Error::kSaslAuthenticationFailed);
    response.error_message = std::string(token.status().message());
    return answer(response, frame.header, true);
  }
  response.auth_bytes = io::Buffer::copy_of(std::string_view(*token));
  response.error_message = std::nullopt;
  return answer(response, frame.header, false);
}

absl::StatusOr<std::string> SaslServerSession::on_token(std::string_view token) {
  if (scram_.has_value()) {
    absl::StatusOr<std::string> answer = scram_->step(token);
    if (answer.ok() && scram_->complete()) {
      user_ = scram_->user();
      state_ = State::kDone;
    }
    return answer;
  }
  absl::StatusOr<std::string> user = check_plain_token(config_->plain, token);
  if (!user.ok()) return user.status();
  user_ = std::move(*user);
  state_ = State::kDone;
  return std::string();
}

SaslServerSession::Step SaslServerSession::on_bare_token(const io::Buffer& frame) {
  if (state_ != State::kBareToken) return Step{std::nullopt, true};
  absl::StatusOr<std::string> token = on_token(frame.view());
  if (!token.ok()) return Step{std::nullopt, true};
  // The server's token (PLAIN: empty), size-prefixed.
  const uint32_t size = static_cast<uint32_t>(token->size());
  std::string bytes = {static_cast<char>(size >> 24), static_cast<char>(size >> 16), static_cast<char>(size >> 8),
                       static_cast<char>(size)};
  bytes += *token;
  Step step;
  step.response.emplace();
  step.response->append(io::Buffer::copy_of(std::string_view(bytes)));
  return step;
}

}  // namespace brook::net
