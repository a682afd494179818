#!/usr/bin/env bash
# Installs every Debian 12 package that zshard's build, tests and benchmarks
# need. Idempotent: packages already present are skipped. Run as root.
# python3-torch is Debian's PyTorch (1.13): the Python package's tests, the
# trainer workload and the benchmarks' baselines use it. python3-pip: the
# Python package's test installs it with `pip install ./python`, offline.
# etcd-server: the etcd state store's tests start their own etcd.
# iproute2 and nftables: the network-fault tests make network namespaces,
# veths, a bridge, blackhole routes, tc tbf and nftables drop rules.
# chromium: the dashboard's browser test drives it headless (tests/browser).
#   --with-baselines   accepted for compatibility; torch is always installed
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgloo-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libsqlite3-dev libcpp-httplib-dev libssl-dev
  python3 python3-pip python3-prometheus-client python3-torch
  clang-14 libclang-rt-14-dev openssl procps tmux bsdutils
  etcd-server iproute2 nftables
  nodejs npm chromium
)
if [[ -n "${1:-}" && "$1" != "--with-baselines" ]]; then
  echo "install-deps.sh: unknown argument '$1'" >&2
  exit 2
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps.sh: must run as root (apt-get)" >&2
  exit 2
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# nodejs/npm may come from elsewhere on the machine: skip them if present.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  tmp=()
  for p in "${missing[@]}"; do
    [[ "$p" == nodejs || "$p" == npm ]] || tmp+=("$p")
  done
  missing=("${tmp[@]+"${tmp[@]}"}")
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps.sh: all packages present"
  exit 0
fi
echo "install-deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
