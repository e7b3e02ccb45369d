// io/errno_status.h
//
// Maps errno values from the kernel to absl::Status codes, following the
// contracts in io/disk.h and io/network.h. Shared by the real backends
// (io/uring, io/posix) so that both report a failure alike; pure functions.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace brook::io {

// File-system errors, as io/disk.h says: ENOENT→NotFound,
// EEXIST→AlreadyExists, ENOSPC, EDQUOT and EFBIG (past the file size
// limit)→ResourceExhausted; EIO and
// everything else→Internal. Messages carry `what` and the strerror text.
absl::Status disk_error(int err, std::string_view what);

// Socket errors: a reset, refused or unreachable peer is Unavailable, a
// timeout DeadlineExceeded, a cancelled operation Cancelled, an address in
// use AlreadyExists, descriptor exhaustion ResourceExhausted, EACCES/EPERM
// PermissionDenied; everything else Internal.
absl::Status network_error(int err, std::string_view what);

}  // namespace brook::io
