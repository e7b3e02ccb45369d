#!/usr/bin/env bash
# Starts three controller processes and three broker processes of
# build/tools/brook on loopback (data in a fresh temporary directory), runs
# brook-client-bench against them with a topic of three replicas,
# min.insync.replicas=2 and acks=all, and stops the cluster. Arguments go to
# brook-client-bench (for example --messages 300000 --rate-seconds 10).
# Environment:
#   BROOK_BUILD_DIR   build directory (default: build)
#   BROOK_BENCH_FSYNC 1: every replica syncs before it acknowledges
#                     (log.flush.interval.messages=1)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BROOK_BUILD_DIR:-build}"
brook="$build_dir/tools/brook"
bench="$build_dir/tools/brook-client-bench"
[ -x "$bench" ] || cmake --build "$build_dir" --target brook brook-client-bench

work=$(mktemp -d /tmp/brook-bench-cluster.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cluster_id=$("$brook" random-uuid)
voters="controller.quorum.voters=1@127.0.0.1:19301,2@127.0.0.1:19302,3@127.0.0.1:19303"
extra=()
if [ "${BROOK_BENCH_FSYNC:-0}" = 1 ]; then extra+=(--override log.flush.interval.messages=1); fi
for n in 1 2 3; do
  "$brook" server --data-dir "$work/c$n" --cluster-id "$cluster_id" --override process.roles=controller \
    --override node.id=$n --override "listeners=CONTROLLER://127.0.0.1:1930$n" --override "$voters" \
    >"$work/c$n.log" 2>&1 &
  pids+=($!)
done
broker_pids=()
for n in 4 5 6; do
  "$brook" server --data-dir "$work/b$n" --cluster-id "$cluster_id" --override process.roles=broker \
    --override node.id=$n --override "listeners=PLAINTEXT://127.0.0.1:1909$n" --override "$voters" \
    "${extra[@]}" >"$work/b$n.log" 2>&1 &
  pids+=($!)
  broker_pids+=(--broker-pid $!)
done
bootstrap=127.0.0.1:19094,127.0.0.1:19095,127.0.0.1:19096
# Until all three brokers are unfenced (kcat lists them).
for _ in $(seq 1 100); do
  if [ "$(kcat -b "$bootstrap" -L -m 2 2>/dev/null | grep -c 'at 127.0.0.1:1909')" = 3 ]; then break; fi
  sleep 0.2
done
"$bench" --bootstrap "$bootstrap" "${broker_pids[@]}" --replication-factor 3 --min-insync 2 --acks all "$@"
