#!/usr/bin/env bash
# `make bench`: runs linkfit-bench's standard set from a release build directory.
#   scripts/bench.sh build/release [OUT]
# Results go to OUT (default out/bench/<experiment>/): summary.json, report.md, CSV and SVG plots.
# The linkfit policy runs when the linkfit binary exists in the build directory; otherwise only the
# baselines run (and this script says so).
set -euo pipefail

build_dir="${1:-build/release}"
out_root="${2:-out/bench}"
repo_root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo_root"

bench="$build_dir/bench/linkfit-bench"
linkfit="$build_dir/src/app/linkfit"
if [[ ! -x "$bench" ]]; then
  echo "bench.sh: $bench not built (configure with LINKFIT_BUILD_BENCH=ON)" >&2
  exit 1
fi

baselines="default-scheduler,random,dotprod,clustering,packing,bestfit,fgd"
policies="$baselines"
if [[ -x "$linkfit" ]]; then
  policies="linkfit,$baselines"
else
  echo "bench.sh: $linkfit not built; running the baselines only" >&2
fi

run() {
  local experiment="$1"
  shift
  mkdir -p "$out_root/$experiment"
  echo "== linkfit-bench $experiment $*" >&2
  nice "$bench" "$experiment" --out "$out_root/$experiment" --linkfit "$linkfit" --quiet "$@" \
    > "$out_root/$experiment/stdout.txt"
  echo "   -> $out_root/$experiment/report.md" >&2
}

run fgd --trace ../shared/traces/alibaba-gpu-2023 --workload default --seeds 42-51 \
  --policies "$policies"
# The topology, mig and latency experiments are not implemented yet (bench/RESULTS.md says what
# is pending); add them here as they land.
