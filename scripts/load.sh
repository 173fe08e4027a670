#!/bin/bash
# Runs the extender load benchmark (issue 3 §5, DESIGN.md §11) from an existing build; builds
# nothing. Usage: scripts/load.sh BUILD_DIR [linkfit-load flags...] (any but --linkfit,
# --parse-only and --repo, which it gives itself: a flag given twice is an error)
#   scripts/load.sh build/release
#   scripts/load.sh build/release --sizes 1000 --requests 1000
# The server runs pinned to CPU 0 and the client to CPU 1 (taskset, util-linux); on a machine with
# other work on those CPUs, say so next to the figures. See bench/RESULTS.md.
set -euo pipefail
if [[ $# -lt 1 ]]; then
  echo "usage: scripts/load.sh BUILD_DIR [linkfit-load flags...]" >&2
  exit 2
fi
build=$1
shift
cd "$(dirname "$0")/.."
for binary in "$build/bench/load/linkfit-load" "$build/bench/load/linkfit-parse-only" \
              "$build/src/app/linkfit"; do
  if [[ ! -x $binary ]]; then
    echo "scripts/load.sh: $binary is missing; build the targets linkfit, linkfit-load and" \
         "linkfit-parse-only first (e.g. cmake --build $build --target linkfit linkfit-load" \
         "linkfit-parse-only)" >&2
    exit 1
  fi
done
command -v taskset >/dev/null || { echo "scripts/load.sh: taskset (util-linux) is missing" >&2; exit 1; }
exec "$build/bench/load/linkfit-load" --linkfit "$build/src/app/linkfit" \
  --parse-only "$build/bench/load/linkfit-parse-only" --repo . "$@"
