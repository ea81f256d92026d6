#!/usr/bin/env bash
# Activation transfer bandwidth between two processes through pipeworks' transport (bench_transport:
# CAF control messages, tensors over UCX, measured at the receiver) against ucx_perftest tag_bw at
# the same sizes, in the same UCX mode (peer error handling): over shared memory on this host, and
# over TCP between two network namespaces (root only; where namespaces cannot be made, TCP over lo
# instead). Prints one table.
# Usage: bench/transport_bandwidth.sh   (COUNT=2000 REPEATS=3 PIPEWORKS_BIN_DIR=build/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
bench="$(realpath "${PIPEWORKS_BIN_DIR:-build/bin}")/bench_transport"
count="${COUNT:-2000}" repeats="${REPEATS:-3}"
sizes=(65536 1048576 16777216)
command -v ucx_perftest >/dev/null || { echo "ucx_perftest missing: scripts/install-deps.sh installs ucx-utils" >&2; exit 1; }
work="$(mktemp -d)"
ns_a="pwbw$$a" ns_b="pwbw$$b" br="pwbw$$br"
cleanup() {
  pkill -P $$ 2>/dev/null || true
  ip link del "$br" 2>/dev/null || true
  ip link del "${br}a" 2>/dev/null || true
  ip link del "${br}b" 2>/dev/null || true
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export UCX_POSIX_ERROR_HANDLING=y  # what pipeworks' transport sets: shared memory with peer errors

n_for() { if [ "$1" -ge 16777216 ]; then echo $((count / 5)); else echo "$count"; fi; }

# ucx_perftest tag_bw (MB/s, 10^6 bytes): $1 = launcher of the server ("" or "ip netns exec NS"), $2 = the
# client's launcher, $3 = the server's address, $4 = size; UCX_TLS from the environment.
perftest() {
  local port=$((20000 + RANDOM % 20000))
  $1 ucx_perftest -p "$port" -t tag_bw -e -s "$4" -n "$(n_for "$4")" > /dev/null 2>&1 &
  sleep 0.5
  $2 ucx_perftest "$3" -p "$port" -t tag_bw -e -s "$4" -n "$(n_for "$4")" 2>/dev/null \
    | awk '/Final:/ {printf "%.1f\n", $6 * 1.048576}'  # perftest prints MiB/s; the table is in MB/s
  wait
}

# bench_transport (MB/s at the receiver): $1 = receiver's launcher, $2 = sender's, $3 = listen
# address, $4 = size.
pipeworks_bw() {
  local fifo="$work/in.$RANDOM"
  mkfifo "$fifo"
  sleep 600 > "$fifo" &
  local keep=$!
  $1 "$bench" receive --listen "$3:0" < "$fifo" > "$work/recv.out" 2>&1 &
  local at=""
  for _ in $(seq 1 100); do at=$(awk '/listening on/ {print $3}' "$work/recv.out"); [ -n "$at" ] && break; sleep 0.05; done
  $2 "$bench" send --to "$at" --bytes "$4" --count "$(n_for "$4")" 2>/dev/null | tail -1
  kill "$keep" 2>/dev/null || true
  wait 2>/dev/null || true
}

rows=()
row() {  # path, size, perftest, pipeworks
  rows+=("$(printf "%-34s %9s %14.0f %14.0f %7.2f" "$1" "$2" "$3" "$4" "$(awk -v a="$4" -v b="$3" 'BEGIN {print a / b}')")")
}
median() { printf "%s\n" "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
human() { case $1 in 65536) echo 64KiB ;; 1048576) echo 1MiB ;; 16777216) echo 16MiB ;; *) echo "$1" ;; esac; }

# $2.. run with UCX_TLS=$1 ("" leaves it as it is).
with_tls() { local t=$1; shift; if [ -n "$t" ]; then UCX_TLS=$t "$@"; else "$@"; fi; }

# A row per size for one path: $1 = its label, $2 and $3 = the server's and the client's launchers,
# $4 = the server's address, $5 and $6 = UCX_TLS for perftest and for pipeworks. Both are measured
# REPEATS times, alternating, and their medians compared (perftest alone varies by up to 2x between
# runs on a shared VM).
measure() {
  local s a b
  for s in "${sizes[@]}"; do
    a=() b=()
    for _ in $(seq 1 "$repeats"); do
      a+=("$(with_tls "$5" perftest "$2" "$3" "$4" "$s")")
      b+=("$(with_tls "$6" pipeworks_bw "$2" "$3" "$4" "$s")")
    done
    row "$1" "$(human "$s")" "$(median "${a[@]}")" "$(median "${b[@]}")"
  done
}

measure "shared memory, one host" "" "" 127.0.0.1 "" ""

netns=no
if ip netns add "$ns_a" 2>/dev/null && ip netns add "$ns_b" 2>/dev/null &&
   ip link add "$br" type bridge 2>/dev/null; then
  octet=$((100 + $$ % 150))
  ip addr add "10.$octet.9.1/24" dev "$br" && ip link set "$br" up
  for k in a b; do
    ns="pwbw$$$k"; ip link add "${br}$k" type veth peer name "${br}${k}p"
    ip link set "${br}${k}p" netns "$ns"; ip link set "${br}$k" master "$br"; ip link set "${br}$k" up
    addr="10.$octet.9.$([ $k = a ] && echo 2 || echo 3)"
    ip netns exec "$ns" ip addr add "$addr/24" dev "${br}${k}p"
    ip netns exec "$ns" ip link set "${br}${k}p" up; ip netns exec "$ns" ip link set lo up
  done
  netns=yes
  # perftest restricted to TCP; pipeworks' workers pick TCP themselves for another host's address.
  measure "TCP, two network namespaces" "ip netns exec $ns_a" "ip netns exec $ns_b" "10.$octet.9.2" tcp ""
fi

# Without namespaces, TCP is still measured on this host: both sides restricted to TCP over lo.
[ "$netns" = yes ] || measure "TCP on one host (lo, UCX_TLS=tcp)" "" "" 127.0.0.1 tcp tcp

echo "Activation transfer bandwidth, MB/s (ucx_perftest tag_bw -e at the sender; pipeworks at the receiver), medians of $repeats"
printf "%-34s %9s %14s %14s %7s\n" "path" "tensor" "ucx_perftest" "pipeworks" "ratio"
printf "%s\n" "${rows[@]}"
[ "$netns" = yes ] || echo "(TCP across namespaces skipped: ip netns add needs root with CAP_NET_ADMIN; TCP measured over lo)"
