#!/usr/bin/env bash
# Checks that a simulated run is a function of its seed alone, not of the
# compiler or the optimisation level that built it: builds `brook` with
# clang at -O1 in its own build directory, then compares, seed by seed and
# scenario by scenario, the trace hash of every run with that of the
# release build (g++ -O2, build/; its `brook` is built first if need be).
# C++ leaves the order in which a call's arguments are evaluated to the
# compiler (g++ and clang differ), so two random draws in one call's
# arguments, or a computation whose result hangs on the optimiser, shows
# here as the first seed whose hashes differ, with the commands that write
# both traces.
# Usage:
#   scripts/determinism.sh [SEEDS]      (default 1..10; "A..B")
# Environment:
#   BROOK_CLANG_BUILD_DIR  the clang build directory (default: build-clang)
#   BROOK_DETERMINISM_SCENARIOS  scenarios to run (default: all, space-separated)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="${1:-1..10}"
clang_dir="${BROOK_CLANG_BUILD_DIR:-build-clang}"

scripts/install-deps.sh
if ! command -v clang++ >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update
  $sudo apt-get install -y clang
fi

BROOK_TARGETS=brook scripts/build.sh
if [ ! -f "$clang_dir/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$clang_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE=-O1
fi
cmake --build "$clang_dir" --target brook

builds=(build "$clang_dir")
if [ -n "${BROOK_DETERMINISM_SCENARIOS:-}" ]; then
  read -r -a scenarios <<<"$BROOK_DETERMINISM_SCENARIOS"
else
  mapfile -t scenarios < <(build/tools/brook sim --list)
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
differ=0
for scenario in "${scenarios[@]}"; do
  for i in "${!builds[@]}"; do
    # A sweep exits 1 when a seed fails (the mutant scenarios' seeds are
    # meant to): only the hashes are compared here.
    "${builds[$i]}/tools/brook" sim --seeds "$seeds" --scenario "$scenario" 2>/dev/null |
      sed -n 's/^seed \([0-9]*\): .*trace-hash=\([0-9a-f]*\).*/\1 \2/p' >"$out/$i" || true
  done
  if [ ! -s "$out/0" ]; then
    echo "$scenario: build/tools/brook printed no trace hashes" >&2
    differ=1
    continue
  fi
  alike=1
  for i in "${!builds[@]}"; do
    if [ "$i" -eq 0 ] || cmp -s "$out/0" "$out/$i"; then continue; fi
    seed=$( (diff "$out/0" "$out/$i" || true) | sed -n 's/^[<>] \([0-9]*\) .*/\1/p' | head -1)
    b="${builds[$i]}"
    echo "$scenario: seed ${seed:-?} differs between build/ and $b/; compare their traces with"
    echo "  build/tools/brook sim --seed ${seed:-?} --scenario $scenario --trace /tmp/a.jsonl"
    echo "  $b/tools/brook sim --seed ${seed:-?} --scenario $scenario --trace /tmp/b.jsonl"
    echo "  diff /tmp/a.jsonl /tmp/b.jsonl | head"
    alike=0
    differ=1
  done
  if [ "$alike" -eq 1 ]; then echo "$scenario: $(wc -l <"$out/0") seeds alike in ${builds[*]}"; fi
done
if [ "$differ" -ne 0 ]; then
  echo "determinism: runs differ between builds" >&2
  exit 1
fi
echo "determinism: every run alike in ${builds[*]}"
