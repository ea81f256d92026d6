#!/usr/bin/env bash
# All-reduce bus bandwidth across processes on this host (bench_allreduce: pipeworks' shares,
# reduce-scatter and all-gather over the wire, sums in replica order) for w = 2 and 4, against
# ucx_perftest tag_bw point to point at the chunk size, in the same UCX mode (peer errors).
# bus bandwidth = algorithm bandwidth (gradient bytes / time) x 2 (w - 1) / w.
# Usage: bench/allreduce_busbw.sh   (BYTES=16777216 COUNT=20 PIPEWORKS_BIN_DIR=build/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
bench="$(realpath "${PIPEWORKS_BIN_DIR:-build/bin}")/bench_allreduce"
bytes="${BYTES:-16777216}" count="${COUNT:-20}"
command -v ucx_perftest >/dev/null || { echo "ucx_perftest missing: scripts/install-deps.sh installs ucx-utils" >&2; exit 1; }
work="$(mktemp -d)"
trap 'pkill -P $$ 2>/dev/null || true; rm -rf "$work"' EXIT
export UCX_POSIX_ERROR_HANDLING=y

perftest() {  # $1: message bytes; prints MB/s
  local port=$((20000 + RANDOM % 20000))
  ucx_perftest -p "$port" -t tag_bw -e -s "$1" -n 200 > /dev/null 2>&1 &
  sleep 0.5
  ucx_perftest 127.0.0.1 -p "$port" -t tag_bw -e -s "$1" -n 200 2>/dev/null \
    | awk '/Final:/ {printf "%.1f\n", $6 * 1.048576}'  # perftest prints MiB/s; the table is in MB/s
  wait
}

echo "All-reduce of $bytes bytes of f32 gradient across w processes on 127.0.0.1, median of $count"
printf "%-3s %12s %12s %12s %16s %7s\n" "w" "seconds" "algbw MB/s" "busbw MB/s" "perftest MB/s" "ratio"
for w in 2 4; do
  "$bench" lead --world "$w" --bytes "$bytes" --count "$count" > "$work/lead.out" 2> "$work/lead.err" &
  lead=$!
  at=""
  for _ in $(seq 1 100); do at=$(awk '/listening on/ {print $3}' "$work/lead.out"); [ -n "$at" ] && break; sleep 0.05; done
  for _ in $(seq 2 "$w"); do
    "$bench" join --to "$at" --world "$w" --bytes "$bytes" --count "$count" 2>> "$work/join.err" &
  done
  wait "$lead" || { cat "$work/lead.err" "$work/join.err" >&2; exit 1; }
  wait
  read -r seconds alg bus _ < <(tail -1 "$work/lead.out")
  p2p=$(perftest $((bytes / w)))  # each piece and each sum is a chunk of bytes / w
  printf "%-3s %12.4f %12.0f %12.0f %16.0f %7.2f\n" "$w" "$seconds" "$alg" "$bus" "$p2p" "$(awk -v a="$bus" -v b="$p2p" 'BEGIN {print a / b}')"
done
