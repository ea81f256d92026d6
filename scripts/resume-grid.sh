#!/usr/bin/env bash
# Resume grid: for every schedule, gpt-tiny runs with --save-every are killed with SIGKILL and
# resumed with --resume, then compared with an uninterrupted run: final weights byte for byte, and
# every per-step loss. Prints a table; exits 1 if any cell differs.
#   scripts/resume-grid.sh [STEPS] [EVERY]
#       one process: each run killed once checkpoint K is complete (K = 1, 3, 5 times EVERY, plus
#       0-50 ms); defaults 24 and 3.
#   scripts/resume-grid.sh --workers [--trials N] [--steps S] [--every E] [--schedules a,b,...]
#       a driver and two worker processes on 127.0.0.1: in each trial a random worker is killed
#       0-200 ms after the first checkpoint is complete, and the run resumed on the survivor and a
#       fresh worker, in swapped order in every other trial; N trials per schedule (default 100),
#       S steps (default 60), a checkpoint every E (default 3).
# Schedules are the built-in names, and cyclic-p2p: cyclic with --reduce p2p.
# Needs build/bin/pipeworks (or $PIPEWORKS_BIN_DIR/pipeworks) and Debian's fortunes.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${PIPEWORKS_BIN_DIR:-build/bin}/pipeworks"
[ -x "$bin" ] || { echo "resume-grid: $bin not found; run scripts/build.sh first" >&2; exit 2; }
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
workers=0 trials=100 steps="" every="" schedules="gpipe,1f1b,interleaved,zb-h1,zb-h2,bfs,zbv,v-half,v-min,dualpipev,dualpipe,pipedream,pipedream-vs,2bw,cyclic,cyclic-p2p"
positional=()
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers=1 ;;
    --trials) trials="$2"; shift ;;
    --steps) steps="$2"; shift ;;
    --every) every="$2"; shift ;;
    --schedules) schedules="$2"; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) positional+=("$1") ;;
  esac
  shift
done
if [ "$workers" = 1 ]; then steps="${steps:-60}"; else steps="${steps:-${positional[0]:-24}}"; fi
every="${every:-${positional[1]:-3}}"
work="$(mktemp -d "${TMPDIR:-/tmp}/pipeworks-resume-grid.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
head -c 200000 /usr/share/games/fortunes/fortunes > "$work/text.txt" 2>/dev/null ||
  { echo "resume-grid: needs Debian's fortunes package (scripts/install-deps.sh)" >&2; exit 2; }

shape() {  # the stages, chunks and replicas of each schedule (w = 2 everywhere)
  case "$1" in
    interleaved|bfs) echo "--stages 2 --chunks 2 --replicas 2" ;;
    *) echo "--stages 2 --replicas 2" ;;
  esac
}
args() {  # the flags of one run of schedule $1, then more, into the array `a`
  local kind="$1"; shift
  local schedule=(--schedule "$kind")  # cyclic-p2p: cyclic with its point-to-point reduce
  [ "$kind" = cyclic-p2p ] && schedule=(--schedule cyclic --reduce p2p)
  # shellcheck disable=SC2206
  a=(train --model gpt-tiny --data "$work/text.txt" --steps "$steps" --batch 16 --microbatches 4
     "${schedule[@]}" $(shape "$kind") --optimizer adamw --lr 3e-3 --sample 0 --eval-windows 4 "$@")
}
losses() {  # "step loss" lines of a --metrics file
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    j=json.loads(l)
    if "step" in j and "final_loss" not in j: print(j["step"], repr(j["loss"]))' "$1"
}
# Whether the resumed run $1 (its prefix) ended with the uninterrupted run's weights and losses;
# sets `from` to the step it resumed after.
same_as_whole() {
  local d="$1" r="$2"
  losses "$r.jsonl" > "$r.losses" 2>/dev/null || return 1
  from=$(( $(head -1 "$r.losses" | cut -d' ' -f1) - 1 ))
  cmp -s "$d/whole.safetensors" "$r.safetensors" && grep -qxFf "$r.losses" "$d/whole.losses" &&
    [ "$(wc -l < "$r.losses")" -eq $((steps - from)) ]
}
whole_run() {  # the uninterrupted run of schedule $1 into $2/whole.*; false if it failed
  local kind="$1" d="$2"
  args "$kind" --save "$d/whole.safetensors" --metrics "$d/whole.jsonl"
  "$bin" "${a[@]}" > "$d/whole.log" 2>&1 || return 1
  losses "$d/whole.jsonl" > "$d/whole.losses"
}

# A worker on 127.0.0.1 in the background: its pid in `wpid`, its address in `waddr`.
start_worker() {
  local log="$1"
  "$bin" worker --listen 127.0.0.1:0 > "$log.out" 2> "$log.err" &
  wpid=$!
  disown "$wpid"  # killed on purpose: no "Killed" line from the shell
  pids+=("$wpid")
  waddr=""
  for _ in $(seq 1 600); do
    waddr=$(sed -n 's/.*listening on //p' "$log.out" 2>/dev/null)
    [ -n "$waddr" ] && return 0
    kill -0 "$wpid" 2>/dev/null || break
    sleep 0.05
  done
  echo "resume-grid: a worker did not start: $(cat "$log.err")" >&2
  return 1
}

stop_workers() {  # SIGKILL, then until they are gone
  kill -9 "$@" 2>/dev/null
  for p in "$@"; do while kill -0 "$p" 2>/dev/null; do sleep 0.01; done; done
}

if [ "$workers" = 1 ]; then
  echo "driver + 2 workers on 127.0.0.1, $steps steps, a checkpoint every $every, $trials trials per schedule"
  echo "| schedule | trials | resumed bit for bit | of them in swapped order | finished before the kill | failed |"
  echo "|---|---|---|---|---|---|"
  failed=0
  IFS=, read -r -a kinds <<< "$schedules"
  for kind in "${kinds[@]}"; do
    d="$work/$kind"; mkdir -p "$d"
    if ! whole_run "$kind" "$d"; then
      printf '| %s | uninterrupted run failed: %s |\n' "$kind" "$(tail -1 "$d/whole.log")"; failed=1; continue
    fi
    ok=0 swapped_ok=0 unkilled=0 bad=0 first=""
    for t in $(seq 1 "$trials"); do
      c="$d/ckpt-$t" r="$d/resumed-$t"
      start_worker "$d/w1-$t" || { bad=$((bad + 1)); continue; }; p1=$wpid a1=$waddr
      start_worker "$d/w2-$t" || { bad=$((bad + 1)); continue; }; p2=$wpid a2=$waddr
      args "$kind" --save-every "$every" --checkpoint-dir "$c" --workers "$a1,$a2"
      "$bin" "${a[@]}" > "$d/killed-$t.log" 2>&1 &
      run=$!
      at=$(printf 'step-%08d' "$every")
      while kill -0 "$run" 2>/dev/null && [ ! -f "$c/$at/manifest.json" ]; do sleep 0.005; done
      sleep "0.$(printf '%03d' $((RANDOM % 200)))"
      victim=$((RANDOM % 2 + 1))
      if [ "$victim" = 1 ]; then kill -9 "$p1" 2>/dev/null; survivor=$a2; else kill -9 "$p2" 2>/dev/null; survivor=$a1; fi
      wait "$run"; killed_rc=$?
      if [ "$killed_rc" = 0 ]; then
        unkilled=$((unkilled + 1))
        stop_workers "$p1" "$p2"
        continue
      fi
      start_worker "$d/w3-$t" || { bad=$((bad + 1)); continue; }; p3=$wpid a3=$waddr
      # The survivor keeps its process number in odd trials; in even ones the two swap places.
      swap=$((t % 2 == 0))
      if [ "$victim" = 1 ]; then order="$a3,$survivor"; [ "$swap" = 1 ] && order="$survivor,$a3"
      else order="$survivor,$a3"; [ "$swap" = 1 ] && order="$a3,$survivor"; fi
      if "$bin" train --resume "$c" --workers "$order" --save "$r.safetensors" --metrics "$r.jsonl" \
           --sample 0 --eval-windows 4 > "$r.log" 2>&1 && same_as_whole "$d" "$r"; then
        ok=$((ok + 1)); [ "$swap" = 1 ] && swapped_ok=$((swapped_ok + 1))
        rm -rf "$c"
      else
        bad=$((bad + 1)); failed=1
        [ -z "$first" ] && first="trial $t (worker $victim killed, resumed on $order): $(tail -1 "$r.log")"
        mkdir -p "${RESUME_GRID_KEEP:-$PWD/resume-grid-failures}"
        cp -r "$c" "$r.log" "$d/killed-$t.log" "${RESUME_GRID_KEEP:-$PWD/resume-grid-failures}/" 2>/dev/null
      fi
      stop_workers "$p1" "$p2" "$p3"
      pids=()
    done
    printf '| %s | %d | %d | %d | %d | %d%s |\n' "$kind" "$trials" "$ok" "$swapped_ok" "$unkilled" "$bad" \
      "${first:+ (first: $first)}"
  done
  exit "$failed"
fi

kills=(1 3 5)  # kill once checkpoint K * EVERY is complete (plus 0-50 ms)
printf '| schedule |'; for k in "${kills[@]}"; do printf ' kill after step %d+ |' $((k * every)); done; echo
printf '|---|'; for _ in "${kills[@]}"; do printf -- '---|'; done; echo
failed=0
IFS=, read -r -a kinds <<< "$schedules"
for kind in "${kinds[@]}"; do
  d="$work/$kind"; mkdir -p "$d"
  if ! whole_run "$kind" "$d"; then
    printf '| %s | uninterrupted run failed: %s |\n' "$kind" "$(tail -1 "$d/whole.log")"; failed=1; continue
  fi
  printf '| %s |' "$kind"
  for k in "${kills[@]}"; do
    c="$d/ckpt-$k"; at=$(printf 'step-%08d' $((k * every)))
    args "$kind" --save-every "$every" --checkpoint-dir "$c"
    "$bin" "${a[@]}" > "$d/killed-$k.log" 2>&1 &
    pid=$!  # pipeworks itself, not a subshell: SIGKILL must reach the run
    while kill -0 "$pid" 2>/dev/null && [ ! -f "$c/$at/manifest.json" ]; do sleep 0.005; done
    sleep "0.$(printf '%03d' $((RANDOM % 50)))"
    kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    latest=$(ls "$c" | grep '^step-' | sort | tail -1)
    r="$d/resumed-$k"
    if ! "$bin" train --resume "$c" --save "$r.safetensors" --metrics "$r.jsonl" \
         --sample 0 --eval-windows 4 > "$r.log" 2>&1; then
      printf ' FAIL (resume: %s) |' "$(tail -1 "$r.log")"; failed=1; continue
    fi
    if same_as_whole "$d" "$r"; then
      printf ' ok (resumed at %s) |' "$from"
    else
      printf ' DIFFERS (resumed at %s, latest %s) |' "$from" "$latest"; failed=1
    fi
  done
  echo
done
exit "$failed"
