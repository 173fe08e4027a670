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

# linkfit runs with the recommended operator setting: scores on 0..140, extender weight 1
# (bench/config/linkfit-fine.yaml; bench/RESULTS.md has the measurements behind it).
linkfit_args=(--linkfit-config bench/config/linkfit-fine.yaml --weight 1)

# FGD protocol: baselines in the paper simulator's mode (the default for fgd). linkfit takes
# ~1-2 min per seed on a shared 2-core box (HTTP per pod); LINKFIT_BENCH_SEEDS narrows the seeds.
run fgd --trace ../shared/traces/alibaba-gpu-2023 --workload default \
  --seeds "${LINKFIT_BENCH_SEEDS:-42-51}" --policies "$policies" "${linkfit_args[@]}"
# Mixed-topology cluster, Philly-shaped demand with departures (about 1 min for 10 seeds).
run topology --seeds 42-51 --jobs 3000 --policies "${policies/dotprod,clustering,/}" \
  "${linkfit_args[@]}"
# MIG-profile demand on DGX A100 40GB + DGX H100 in MIG mode, arrivals and departures (seconds).
mig_policies="first-fit,best-fit,random"
[[ -x "$linkfit" ]] && mig_policies="linkfit,$mig_policies"
run mig --seeds 42-51 --jobs 3000 --policies "$mig_policies" "${linkfit_args[@]}"
# Small random clusters: do small pods leave the whole machines big pods need? Against an exact
# oracle; linkfit once per policy.whole_machines setting (a few minutes for 10 seeds).
wm_policies="bestfit,default-scheduler,fgd,random"
[[ -x "$linkfit" ]] && wm_policies="linkfit,$wm_policies"
run whole-machines --seeds 42-51 --cases 40 --policies "$wm_policies" "${linkfit_args[@]}"
# Verb round trips during an openb replay at 1,000 and 5,000 nodes (linkfit only; ~1-2 min).
if [[ -x "$linkfit" ]]; then
  run latency --seeds 42 --jobs 1000 "${linkfit_args[@]}"
fi
