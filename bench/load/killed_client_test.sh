#!/bin/sh
# linkfit-load killed outright (SIGKILL: none of its handlers runs) must not leave the two servers
# it started running: they hold its output pipe open (a CI step waiting on it never ends) and
# their CPU. Each child server asks the kernel for SIGTERM when its parent dies
# (bench/common/child_process.cc). Usage: killed_client_test.sh LOAD LINKFIT PARSE_ONLY REPO
set -u
load=$1 linkfit=$2 parse_only=$3 repo=$4

children_of() {  # the PIDs whose parent is $1 (from /proc: no procps needed)
  for stat in /proc/[0-9]*/stat; do
    parent=$(sed -n 's/.*) [A-Za-z] \([0-9]*\) .*/\1/p' "$stat" 2>/dev/null)
    [ "$parent" = "$1" ] && basename "$(dirname "$stat")"
  done
}
running() {  # whether $1 exists and is not a zombie (reaped by whoever adopted it, or not)
  state=$(sed -n 's/.*) \([A-Za-z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null)
  [ -n "$state" ] && [ "$state" != Z ]
}

"$load" --linkfit "$linkfit" --parse-only "$parse_only" --repo "$repo" --nodes 40 --sizes 20 \
  --requests 100000000 --warmup 5 --rounds 1 --binds 0 --non-cache-requests 0 \
  --server-cpu -1 --client-cpu -1 >/dev/null 2>&1 &
client=$!
tries=0
until [ "$(children_of "$client" | wc -l)" -ge 2 ]; do  # linkfit, then the parse-only server
  tries=$((tries + 1))
  if [ "$tries" -gt 600 ]; then
    echo "FAIL: the two servers did not start within 60 s"
    kill -9 "$client" $(children_of "$client") 2>/dev/null
    exit 1
  fi
  sleep 0.1
done
servers=$(children_of "$client")
kill -9 "$client"
wait "$client" 2>/dev/null
for pid in $servers; do
  tries=0
  while running "$pid"; do
    tries=$((tries + 1))
    if [ "$tries" -gt 100 ]; then
      echo "FAIL: server $pid still running 10 s after its load client was killed"
      kill -9 $servers 2>/dev/null
      exit 1
    fi
    sleep 0.1
  done
done
echo "ok: both servers ($servers) stopped once their load client was killed"
