#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/README.md) with clang in their own build
# directory, writes seed corpora and runs every target for SECONDS seconds
# (default 30). Exits non-zero if any target crashes, leaks, times out or
# runs out of memory, and prints the reproducer's path. Usage:
#   scripts/fuzz.sh [SECONDS]
# Environment:
#   BROOK_FUZZ_BUILD_DIR  build directory (default: build-fuzz)
#   BROOK_FUZZ_TARGETS    targets to run (default: all, space-separated)
#   BROOK_FUZZ_PARALLEL   targets run at once (default: number of cores)
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
seconds="${1:-30}"
build_dir="${BROOK_FUZZ_BUILD_DIR:-build-fuzz}"
parallel="${BROOK_FUZZ_PARALLEL:-$(nproc)}"
all_targets="fuzz_request fuzz_response fuzz_record_batch fuzz_message_set fuzz_decompress_gzip
  fuzz_decompress_snappy fuzz_decompress_lz4 fuzz_decompress_zstd fuzz_log_recovery"
# shellcheck disable=SC2206
targets=(${BROOK_FUZZ_TARGETS:-$all_targets})

# clang and its libFuzzer runtime (only recommended by Debian's clang),
# installed the way scripts/install-deps.sh installs the rest.
apt_install() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "installing: $*"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update
  $sudo apt-get install -y "$@"
}
scripts/install-deps.sh
if ! command -v clang++ >/dev/null 2>&1; then apt_install clang; fi
if [ ! -f "$(clang++ -print-runtime-dir)/libclang_rt.fuzzer-$(uname -m).a" ]; then
  apt_install "libclang-rt-$(clang++ -dumpversion | cut -d. -f1)-dev"
fi

if [ ! -f "$build_dir/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBROOK_FUZZ=ON
fi
# Only the fuzz targets, the seed generator and the libraries they use.
cmake --build "$build_dir" --target fuzz
built=$(date +%s)

corpus="$build_dir/corpus"
artifacts="$build_dir/fuzz-artifacts"
logs="$build_dir/fuzz-logs"
rm -rf "$artifacts" "$logs"
mkdir -p "$corpus" "$artifacts" "$logs"
"$build_dir/fuzz/brook-fuzz-seeds" "$corpus"
# Frames captured from real clients seed the request decoder too.
mkdir -p "$corpus/fuzz_request"
cp net/kafka/testdata/golden/*.bin "$corpus/fuzz_request/"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

# Runs one target; its exit status goes to $logs/<target>.status.
run_target() {
  local t=$1 status=0
  mkdir -p "$corpus/$t"
  "$build_dir/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$t-" "$corpus/$t" \
    >"$logs/$t.log" 2>&1 || status=$?
  echo "$status" >"$logs/$t.status"
}

echo "== fuzzing ${#targets[@]} targets for ${seconds}s each, $parallel at a time"
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
wait

failed=0
for t in "${targets[@]}"; do
  status=$(cat "$logs/$t.status" 2>/dev/null || echo 255)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logs/$t.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logs/$t.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$logs/$t.log" | tail -1 || true)
  if [ "$status" -eq 0 ]; then
    printf '%-24s ok      %10s runs %7s exec/s  %s\n' "$t" "${runs:-?}" "${rate:-?}" "$cov"
  else
    failed=1
    printf '%-24s FAILED  (exit %d)\n' "$t" "$status"
    grep -E '^==[0-9]+==ERROR|SUMMARY|runtime error|Assertion|deadly signal|timeout|out-of-memory' \
      "$logs/$t.log" | head -5 | sed 's/^/    /' || true
    for f in "$artifacts/$t"-*; do
      [ -e "$f" ] && echo "    reproducer: $f  (rerun: $build_dir/fuzz/$t $f)"
    done
    echo "    log: $logs/$t.log"
  fi
done

finished=$(date +%s)
echo "fuzz step: $((finished - started))s (build $((built - started))s)"
exit "$failed"
