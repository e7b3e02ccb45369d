#!/usr/bin/env bash
# Records the request frames real Kafka clients (kcat/librdkafka 2.0.2 and
# kafka-python 2.0.2) send, into net/kafka/testdata/golden/. The frames are
# test data for net/kafka/golden_test.cc; run this again only to refresh them.
#
# Needs: kcat python3-kafka python3-confluent-kafka (installed when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for p in kcat python3-kafka python3-confluent-kafka; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update && $sudo apt-get install -y "${need[@]}"
fi

BROOK_TARGETS=brook-capture scripts/build.sh
port=${CAPTURE_PORT:-19192}
raw=$(mktemp -d)
build/tools/brook-capture --port "$port" --out "$raw" &
capture=$!
trap 'kill $capture 2>/dev/null || true; rm -rf "$raw"' EXIT
sleep 0.5

b="127.0.0.1:$port"
printf 'k1:v1\nk2:v2\n' | kcat -P -b "$b" -t golden -K: -X client.id=kcat-none
for z in gzip snappy lz4 zstd; do
  printf "key-$z:value-$z-%s\n" aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbbb |
    kcat -P -b "$b" -t golden -K: -z "$z" -X client.id="kcat-$z"
done
printf 'idem:1\n' | kcat -P -b "$b" -t golden -K: -X enable.idempotence=true \
  -X client.id=kcat-idempotent
kcat -C -b "$b" -t golden -o beginning -c 1 -e -X client.id=kcat-consumer > /dev/null
timeout 15 kcat -b "$b" -G golden-group golden -c 1 -X client.id=kcat-group > /dev/null 2>&1 || true
timeout 30 /usr/bin/python3 scripts/capture/kafka_python_clients.py "$port" || true
timeout 15 /usr/bin/python3 scripts/capture/confluent_transactions.py "$port" || true

# Keep the first frame of each (client, API, version), and every Produce
# (one per codec).
out=net/kafka/testdata/golden
rm -rf "$out"
mkdir -p "$out"
declare -A seen
for f in $(ls "$raw" | sort); do
  key=${f#*-}
  key=${key%.bin}
  if [[ $key == *-Produce-* ]] || [ -z "${seen[$key]:-}" ]; then
    seen[$key]=1
    n=1
    name="$key"
    while [ -e "$out/$name.bin" ]; do n=$((n + 1)); name="$key-$n"; done
    cp "$raw/$f" "$out/$name.bin"
  fi
done
ls "$out" | wc -l | xargs echo "golden frames:"
