#!/usr/bin/env bash
# Failure detection across processes: a driver and two workers on 127.0.0.1 train gpt-tiny with
# 1F1B; after the run's first step report, worker 2 is killed (SIGKILL) or frozen (SIGSTOP), and
# the time until the driver reports it lost is measured. Prints median and worst of TRIALS.
# Usage: bench/detection_latency.sh [TRIALS]   (PIPEWORKS_BIN_DIR: default build/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${PIPEWORKS_BIN_DIR:-build/bin}/pipeworks"
trials="${1:-20}"
heartbeat=100 timeout=1000
work="$(mktemp -d)"
# Workers start inside $(...), so they are not this shell's children: their pids are kept.
trap 'pkill -P $$ 2>/dev/null || true; [ -f "$work/pids" ] && kill $(cat "$work/pids") 2>/dev/null; rm -rf "$work"' EXIT
head -c 60000 /usr/share/games/fortunes/fortunes > "$work/text.txt" 2>/dev/null ||
  cat /usr/share/games/fortunes/* | head -c 60000 > "$work/text.txt"

now() { date +%s.%N; }

start_worker() {  # $1: output file; prints the address
  "$bin" worker --listen 127.0.0.1:0 --heartbeat-ms $heartbeat --peer-timeout-ms $timeout \
    > "$1" 2>/dev/null &
  echo $! >> "$work/pids"
  echo $! > "$1.pid"
  for _ in $(seq 1 500); do grep -q "listening on" "$1" 2>/dev/null && break; sleep 0.01; done
  awk '/listening on/ {print $NF}' "$1"
}

trial() {  # $1: KILL or STOP; prints seconds from the signal to the driver's report
  local sig=$1 a1 a2 t0 t1
  a1=$(start_worker "$work/w1"); a2=$(start_worker "$work/w2")
  "$bin" train --model gpt-tiny --data "$work/text.txt" --steps 100000 --batch 16 \
    --microbatches 4 --schedule 1f1b --stages 2 --sample 0 --eval-windows 4 --json \
    --workers "$a1,$a2" --heartbeat-ms $heartbeat --peer-timeout-ms $timeout \
    > "$work/driver.out" 2> "$work/driver.err" &
  local driver=$!
  for _ in $(seq 1 3000); do grep -q '"step"' "$work/driver.out" 2>/dev/null && break; sleep 0.01; done
  t0=$(now)
  kill -$sig "$(cat "$work/w2.pid")"
  while ! grep -q "was lost" "$work/driver.err" 2>/dev/null; do
    kill -0 $driver 2>/dev/null || break
    sleep 0.001
  done
  t1=$(now)
  wait $driver 2>/dev/null || true
  kill -9 "$(cat "$work/w1.pid")" "$(cat "$work/w2.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  grep -q "was lost" "$work/driver.err" || { echo "the driver did not report the lost worker" >&2; cat "$work/driver.err" >&2; exit 1; }
  awk -v a="$t1" -v b="$t0" 'BEGIN {print a - b}'
}

summary() {  # stdin: one number per line; prints median and worst in ms
  sort -g | awk '{v[NR]=$1} END {m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2;
    printf "%8.0f ms %8.0f ms", m * 1000, v[NR] * 1000}'
}

kills=$(for _ in $(seq 1 "$trials"); do trial KILL; done | summary)
stops=$(for _ in $(seq 1 "$trials"); do trial STOP; done | summary)
echo "failure detection, driver + 2 workers on 127.0.0.1, heartbeat ${heartbeat} ms, peer timeout ${timeout} ms, ${trials} trials"
printf "%-28s %11s %11s %s\n" "fault" "median" "worst" "bound"
printf "%-28s %s %s\n" "worker SIGKILL (socket)" "$kills" "   target 1000 ms"
printf "%-28s %s %s\n" "worker SIGSTOP (heartbeats)" "$stops" "   peer timeout ${timeout} ms"
