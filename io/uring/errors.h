// io/uring/errors.h
//
// Maps errno values from the kernel to absl::Status codes, following the
// contracts in io/disk.h and io/network.h. Shared by the Disk and Network of
// this backend; pure functions.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace brook::io::uring {

// File-system errors, as io/disk.h says: ENOENT→NotFound,
// EEXIST→AlreadyExists, ENOSPC and EDQUOT→ResourceExhausted; EIO and
// everything else→Internal. Messages carry `what` and the strerror text.
absl::Status disk_error(int err, std::string_view what);

// Socket errors: a reset, refused or unreachable peer is Unavailable, a
// timeout DeadlineExceeded, a cancelled operation Cancelled, an address in
// use AlreadyExists, descriptor exhaustion ResourceExhausted, EACCES/EPERM
// PermissionDenied; everything else Internal.
absl::Status network_error(int err, std::string_view what);

}  // namespace brook::io::uring
