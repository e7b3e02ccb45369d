#!/usr/bin/env bash
# Installs missing dependencies, builds everything and runs every test.
# Extra arguments go to ctest (for example: -R io_ -V).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build_dir="${BROOK_BUILD_DIR:-build}"
cd "$build_dir"
# Resource allocation (CMakeLists.txt, ctest-resources.json): at most one
# CPU-bound test per core, and up to two tests that mostly wait on real
# clients beside them.
ctest --output-on-failure -j "$(( $(nproc) + 2 ))" --resource-spec-file ctest-resources.json "$@"
