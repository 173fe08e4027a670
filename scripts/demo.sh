#!/usr/bin/env bash
# `make demo`: the guided tour. Runs `BINARY demo` on the demo cluster from the repository root.
#   scripts/demo.sh build/release/src/app/linkfit
set -euo pipefail
binary="$(realpath "${1:?usage: scripts/demo.sh BINARY}")"
cd "$(dirname "$0")/.."
exec "$binary" demo --config config/demo.yaml
