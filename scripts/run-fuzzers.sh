#!/usr/bin/env bash
# Builds the libFuzzer targets with the `fuzz` CMake preset (clang, build/fuzz) and runs each one
# for a bounded time, seeded with the nvidia-smi samples (test/data/nvidia-smi) or the topology
# fixtures (config/topologies).
#
#   scripts/run-fuzzers.sh                 # every fuzzer, 20 s each
#   FUZZ_SECONDS=60 scripts/run-fuzzers.sh fuzz_nvidia_smi
#
# Exits non-zero when a fuzzer finds a crash (the reproducer is left in build/fuzz/artifacts/).
# Without clang++ there is nothing to build: it says so and exits 0.
set -euo pipefail

cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"
jobs="${FUZZ_BUILD_JOBS:-2}"
build_dir=build/fuzz

if ! command -v clang++ >/dev/null 2>&1; then
  echo "run-fuzzers: clang++ not found; libFuzzer targets need clang, skipping"
  exit 0
fi

cmake --preset fuzz >/dev/null
if [[ $# -gt 0 ]]; then
  fuzzers=("$@")
  cmake --build "${build_dir}" --target "${fuzzers[@]}" -j "${jobs}"
else
  cmake --build "${build_dir}" --target linkfit_fuzzers -j "${jobs}"
  fuzzers=()
  for path in "${build_dir}"/test/fuzz/fuzz_*; do
    [[ -f "${path}" && -x "${path}" ]] && fuzzers+=("$(basename "${path}")")
  done
fi

# Seeds per fuzzer (read-only directories); a new fuzzer gets both unless listed here.
seeds_for() {
  case "$1" in
    fuzz_nvidia_smi) echo "test/data/nvidia-smi" ;;
    fuzz_topology_document) echo "config/topologies test/data/topology-documents" ;;
    fuzz_nic_vpd) echo "test/data/vpd" ;;
    fuzz_allocation_record) echo "test/data/allocation-records" ;;
    fuzz_devices_in_use) echo "test/data/devices-in-use" ;;
    fuzz_nvidia_smi_mig) echo "test/data/nvidia-smi" ;;
    fuzz_watch_stream) echo "test/data/watch-streams" ;;
    fuzz_api_status) echo "test/data/api-status test/data/watch-streams" ;;
    fuzz_quantity) echo "test/data/quantities" ;;
    fuzz_config) echo "config" ;;
    fuzz_gpu_models) echo "config" ;;
    fuzz_kubeconfig) echo "test/data/kubeconfigs" ;;
    fuzz_cdi_spec) echo "test/data/cdi-specs" ;;
    *) echo "test/data/nvidia-smi config/topologies" ;;
  esac
}

mkdir -p "${build_dir}/artifacts"
failed=()
for name in "${fuzzers[@]}"; do
  corpus="${build_dir}/corpus/${name}"  # grows across runs; the seeds below are read-only
  mkdir -p "${corpus}"
  args=(-max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="${build_dir}/artifacts/${name}-")
  if [[ -f "test/fuzz/${name}.dict" ]]; then
    args+=(-dict="test/fuzz/${name}.dict")
  fi
  echo "run-fuzzers: ${name} for ${seconds}s"
  read -r -a seeds <<<"$(seeds_for "${name}")"
  if ! "${build_dir}/test/fuzz/${name}" "${args[@]}" "${corpus}" "${seeds[@]}"; then
    failed+=("${name}")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run-fuzzers: FAILED: ${failed[*]} (reproducers in ${build_dir}/artifacts/)"
  exit 1
fi
echo "run-fuzzers: ${#fuzzers[@]} fuzzer(s) ran ${seconds}s each without a finding"
