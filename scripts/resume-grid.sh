#!/usr/bin/env bash
# Resume grid: for every schedule and several kill points, a gpt-tiny run with --save-every is
# killed with SIGKILL (after checkpoint K is complete, plus a random delay), resumed with --resume,
# and compared with an uninterrupted run: final weights byte for byte, every per-step loss.
# Prints a table; exits 1 if any cell differs.
#   scripts/resume-grid.sh [STEPS] [EVERY]      (defaults 24 and 3; needs build/bin/pipeworks)
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${PIPEWORKS_BIN_DIR:-build/bin}/pipeworks"
[ -x "$bin" ] || { echo "resume-grid: $bin not found; run scripts/build.sh first" >&2; exit 2; }
steps="${1:-24}"
every="${2:-3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/pipeworks-resume-grid.XXXXXX")"
trap 'rm -rf "$work"' EXIT
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
  # shellcheck disable=SC2206
  a=(train --model gpt-tiny --data "$work/text.txt" --steps "$steps" --batch 16 --microbatches 4
     --schedule "$kind" $(shape "$kind") --optimizer adamw --lr 3e-3 --sample 0 --eval-windows 4 "$@")
}
losses() {  # "step loss" lines of a --metrics file
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    j=json.loads(l)
    if "step" in j and "final_loss" not in j: print(j["step"], repr(j["loss"]))' "$1"
}

kills=(1 3 5)  # kill once checkpoint K * EVERY is complete (plus 0-50 ms)
printf '| schedule |'; for k in "${kills[@]}"; do printf ' kill after step %d+ |' $((k * every)); done; echo
printf '|---|'; for _ in "${kills[@]}"; do printf -- '---|'; done; echo
failed=0
for kind in gpipe 1f1b interleaved zb-h1 zb-h2 bfs pipedream pipedream-vs 2bw cyclic; do
  d="$work/$kind"; mkdir -p "$d"
  args "$kind" --save "$d/whole.safetensors" --metrics "$d/whole.jsonl"
  if ! "$bin" "${a[@]}" > "$d/whole.log" 2>&1; then
    printf '| %s | uninterrupted run failed: %s |\n' "$kind" "$(tail -1 "$d/whole.log")"; failed=1; continue
  fi
  losses "$d/whole.jsonl" > "$d/whole.losses"
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
    if ! "$bin" train --resume "$c" --save "$d/resumed-$k.safetensors" --metrics "$d/resumed-$k.jsonl" \
         --sample 0 --eval-windows 4 > "$d/resumed-$k.log" 2>&1; then
      printf ' FAIL (resume: %s) |' "$(tail -1 "$d/resumed-$k.log")"; failed=1; continue
    fi
    losses "$d/resumed-$k.jsonl" > "$d/resumed-$k.losses"
    from=$(head -1 "$d/resumed-$k.losses" | cut -d' ' -f1)
    if cmp -s "$d/whole.safetensors" "$d/resumed-$k.safetensors" &&
       grep -qxFf "$d/resumed-$k.losses" "$d/whole.losses" &&
       [ "$(wc -l < "$d/resumed-$k.losses")" -eq $((steps - from + 1)) ]; then
      printf ' ok (resumed at %s) |' "$((from - 1))"
    else
      printf ' DIFFERS (resumed at %s, latest %s) |' "$((from - 1))" "$latest"; failed=1
    fi
  done
  echo
done
exit "$failed"
