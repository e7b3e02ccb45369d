#!/usr/bin/env bash
# Installs the Debian packages Brook builds and tests with, when missing.
# Safe to run repeatedly: it does nothing when everything is present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3 lld
  libabsl-dev libfmt-dev libgtest-dev libgmock-dev librapidcheck-dev
  liburing-dev libzstd-dev libbenchmark-dev zlib1g-dev libsnappy-dev liblz4-dev libre2-dev libssl-dev openssl
  kcat python3-confluent-kafka python3-kafka librdkafka-dev
  golang-go golang-github-shopify-sarama-dev golang-github-segmentio-kafka-go-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y "${missing[@]}"
