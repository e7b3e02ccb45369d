// io/disk.cc
#include "io/disk.h"


namespace brook::io {

absl::Status validate_disk_path(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  if (path.front() == '/') return absl::InvalidArgumentError("absolute path: " + path);
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string_view part(path.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError("bad path component in: " + path);
    }
    start = end + 1;
  }
  return absl::OkStatus();
}

}  // namespace brook::io
