#!/usr/bin/env bash
# Configures and builds Brook. Environment:
#   BROOK_BUILD_DIR   build directory (default: build)
#   BROOK_SANITIZE    ON for an ASan+UBSan build (default: OFF)
#   BROOK_TARGETS     targets to build (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BROOK_BUILD_DIR:-build}"
sanitize="${BROOK_SANITIZE:-OFF}"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DBROOK_SANITIZE="$sanitize"
fi
# shellcheck disable=SC2086
cmake --build "$build_dir" -- ${BROOK_TARGETS:-}
