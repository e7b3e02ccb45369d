// io/errno_status.cc
#include "io/errno_status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace brook::io {
namespace {

std::string describe(int err, std::string_view what) {
  return fmt::format("{}: {}", what, std::strerror(err));
}

}  // namespace

absl::Status disk_error(int err, std::string_view what) {
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(describe(err, what));
    case EEXIST:
      return absl::AlreadyExistsError(describe(err, what));
    case ENOSPC:
    case EDQUOT:
    case EFBIG:  // past the file size limit
      return absl::ResourceExhaustedError(describe(err, what));
    default:
      return absl::InternalError(describe(err, what));  // EIO and everything unexpected
  }
}

absl::Status network_error(int err, std::string_view what) {
  switch (err) {
    case ECONNRESET:
    case ECONNREFUSED:
    case ECONNABORTED:
    case EPIPE:
    case ENOTCONN:
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ENETDOWN:
    case EHOSTDOWN:
    case ENETRESET:
    case EADDRNOTAVAIL:
      return absl::UnavailableError(describe(err, what));
    case ETIMEDOUT:
      return absl::DeadlineExceededError(describe(err, what));
    case ECANCELED:
      return absl::CancelledError(describe(err, what));
    case EADDRINUSE:
      return absl::AlreadyExistsError(describe(err, what));
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
      return absl::ResourceExhaustedError(describe(err, what));
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(describe(err, what));
    default:
      return absl::InternalError(describe(err, what));
  }
}

}  // namespace brook::io
