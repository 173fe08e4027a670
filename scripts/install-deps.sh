#!/usr/bin/env bash
# Installs linkfit's build and test dependencies from Debian bookworm packages when they are
# missing. As root it runs apt-get itself; otherwise it prints the exact command and fails.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libboost-graph-dev        # Boost.Graph: the interconnect graph; its libboost1.74-dev brings
                            # Boost.Asio and Beast, the HTTP server (all header-only)
  nlohmann-json3-dev        # config, topology documents, reports (off the request path)
  libsimdjson-dev           # the request hot path (filter/prioritize bodies)
  libexpected-dev           # tl::expected: Result<T> with C++23's std::expected API
  libyaml-cpp-dev           # YAML config and cluster files
  libcpp-httplib-dev        # HTTP client (API server, harness, tests)
  libssl-dev zlib1g-dev     # TLS (server and client) and cpp-httplib's gzip
  prometheus-cpp-dev        # /metrics
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
                            # the node agent's kubelet PodResources client (gRPC, unix socket)
  libgtest-dev libgmock-dev # tests
  libbenchmark-dev          # microbenchmarks
  gnuplot-nox               # benchmark plots
)
if [[ "${LINKFIT_WITH_CLANG:-0}" == 1 ]]; then
  packages+=(clang libclang-rt-14-dev)  # libFuzzer targets
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "linkfit needs these Debian packages: ${missing[*]}" >&2
  echo "run as root:  apt-get update && $cmd" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
$cmd -qq
