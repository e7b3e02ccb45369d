#!/usr/bin/env bash
# Installs missing dependencies, builds the brook binary and runs it.
# Without arguments it starts a single-node Kafka (broker and controller) on
# localhost:9092 with its data in ./data; arguments are passed to brook (for
# example: scripts/run.sh sim --seeds 1..100).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BROOK_TARGETS=brook scripts/build.sh
build_dir="${BROOK_BUILD_DIR:-build}"
if [ $# -eq 0 ]; then
  set -- server
fi
exec "$build_dir/tools/brook" "$@"
