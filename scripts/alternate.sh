#!/bin/bash
# Runs two or more Google Benchmark binaries (before and after a change) in alternation, pinned to
# one CPU, and prints each case's min and median time per binary. On a box whose speed drifts
# within minutes (bench/RESULTS.md), only binaries timed in the same minutes compare: each round
# runs every case on every binary in turn, `--benchmark_repetitions` times, so that a slow minute
# hits all alike.
#
#   scripts/alternate.sh FILTER ROUNDS BINARY... (run from anywhere; builds nothing)
#   scripts/alternate.sh 'Prioritize/linkfit/names:5000' 8 OLD_BINARY build/dev/bench/linkfit_verbs_bench
#
# Environment: ALTERNATE_CPU (the CPU to pin to, 0), ALTERNATE_REPETITIONS (3 a round),
# ALTERNATE_ARGS (more flags for every binary, e.g. --benchmark_min_time=0.05).
# Output: one line per case, "min / median" per binary in the binaries' order, in the unit the
# benchmark reports.
set -euo pipefail
if [[ $# -lt 3 ]]; then
  echo "usage: scripts/alternate.sh FILTER ROUNDS BINARY..." >&2
  exit 2
fi
filter=$1
rounds=$2
shift 2
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "scripts/alternate.sh: ROUNDS must be a positive number, not '$rounds'" >&2
  exit 2
fi
for binary in "$@"; do
  if [[ ! -x $binary ]]; then
    echo "scripts/alternate.sh: $binary is not an executable" >&2
    exit 1
  fi
done
command -v taskset >/dev/null || { echo "scripts/alternate.sh: taskset (util-linux) is missing" >&2; exit 1; }
cpu=${ALTERNATE_CPU:-0}
repetitions=${ALTERNATE_REPETITIONS:-3}
read -r -a extra <<< "${ALTERNATE_ARGS:-}"
rows=$(mktemp)
csv=$(mktemp)
trap 'rm -f "$rows" "$csv"' EXIT
# One case a run (the CSV reporter stops when two cases have different user counters), each
# case matched exactly: its name with the regular expression's special characters escaped.
mapfile -t cases < <("$1" --benchmark_list_tests --benchmark_filter="$filter" 2>/dev/null)
if [[ ${#cases[@]} -eq 0 ]]; then
  echo "scripts/alternate.sh: no benchmark of $1 matches '$filter'" >&2
  exit 1
fi
for ((round = 0; round < rounds; ++round)); do
  for name in "${cases[@]}"; do
    exact="^$(sed 's/[][\.*^$+?(){}|]/\\&/g' <<< "$name")\$"
    index=0
    for binary in "$@"; do
      # CSV: name,iterations,real_time,cpu_time,time_unit,...; the repetitions' own rows only.
      if ! taskset -c "$cpu" "$binary" --benchmark_filter="$exact" \
        --benchmark_repetitions="$repetitions" --benchmark_format=csv "${extra[@]}" \
        > "$csv" 2>/dev/null; then
        echo "scripts/alternate.sh: $binary failed on '$name'" >&2
        exit 1
      fi
      before=$(wc -l < "$rows")
      awk -F, -v b="$index" 'NR > 1 && $1 !~ /_(mean|median|stddev|cv)"?$/ {
        gsub(/"/, "", $1); print $1 "," b "," $3 "," $5 }' "$csv" >> "$rows"
      if [[ $(wc -l < "$rows") -eq $before ]]; then  # said, never a column silently short
        echo "scripts/alternate.sh: $binary reported no time for '$name' in round $((round + 1))" >&2
      fi
      index=$((index + 1))
    done
  done
done
if [[ ! -s $rows ]]; then
  echo "scripts/alternate.sh: the binaries reported no times for '$filter'" >&2
  exit 1
fi
# Sorted by case, binary, time: each group's first row is its min, its middle row its median.
sort -t, -k1,1 -k2,2n -k3,3g "$rows" | awk -F, '
  function flush() {
    if (n == 0) return
    line[group_case] = line[group_case] sprintf("  %9.2f / %9.2f", t[1], t[int((n + 1) / 2)])
    unit[group_case] = group_unit
  }
  {
    if ($1 != group_case || $2 != group_binary) {
      flush()
      if (!($1 in line)) { order[++cases] = $1; line[$1] = "" }
      group_case = $1; group_binary = $2; group_unit = $4; n = 0
    }
    t[++n] = $3
  }
  END {
    flush()
    for (c = 1; c <= cases; ++c) printf("%-56s%s %s\n", order[c], line[order[c]], unit[order[c]])
  }'
