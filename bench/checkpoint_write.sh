#!/usr/bin/env bash
# Benchmark: writing a checkpoint's rank files with write_safetensors (fsync, rename, sha256)
# against `dd conv=fsync` of the same size on the same disk; prints a markdown table of medians.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${REPEATS:-5}"          # runs per case; pipeworks and dd alternate so both see the same disk
cases="${CASES:-small large}"    # small: ~94 MB (weights, version, Adam m, v); large: ~1 GB
modes="${MODES:-together one-at-a-time}"  # the 4 rank files written at once, or one after another
dir="${DIR:-out/bench-ckpt}"     # on the repository's disk, not /tmp (often tmpfs)
# PIPEWORKS_BIN_DIR: use binaries already built there instead of building build/.
bin="${PIPEWORKS_BIN_DIR:-build/bin}"
[ -n "${PIPEWORKS_BIN_DIR:-}" ] || scripts/build.sh >/dev/null
mkdir -p "$dir"
out=$(mktemp -d)
trap 'rm -rf "$out"; rm -f "$dir/dd.bin"' EXIT

load_before=$(cut -d' ' -f1 /proc/loadavg)
for c in $cases; do
  for r in $(seq "$repeats"); do
    for m in $modes; do
      flag=()
      [ "$m" = together ] || flag=(--one-at-a-time)
      "$bin"/bench_checkpoint_write --dir "$dir" --case "$c" --repeats 1 "${flag[@]}" \
        >>"$out/$c.$m.jsonl"
    done
    bytes=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["bytes"])' \
      <"$out/$c.$m.jsonl")
    sync
    LC_ALL=C dd if=/dev/zero of="$dir/dd.bin" bs=1M count=$(( (bytes + 524288) / 1048576 )) \
      conv=fsync 2>>"$out/$c.dd.txt"
    rm -f "$dir/dd.bin"
  done
done

/usr/bin/python3 - "$out" "$repeats" "$cases" "$modes" "$dir" "$load_before" \
  "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, os, re, statistics, sys
out, repeats, cases, modes, where, load_before, load_after = sys.argv[1:8]
print(f"checkpoint write to {where} ({os.path.realpath(where)}): median of {repeats} runs each, "
      f"pipeworks and dd alternating")
print("| case | bytes | pipeworks MB/s | dd MB/s | ratio (pipeworks/dd) |")
print("|---|---:|---:|---:|---:|")
for c in cases.split():
    dd = []
    for line in open(os.path.join(out, f"{c}.dd.txt")):
        m = re.match(r"(\d+) bytes .* copied, ([0-9.e-]+) s", line)
        if m:
            dd.append(int(m.group(1)) / 1e6 / float(m.group(2)))
    ddm = statistics.median(dd)
    label = {"small": "small: 4 rank files, C=256 6 layers (weights, version, Adam m, v)",
             "large": "large: 4 rank files, gpt-small (weights, Adam m)"}.get(c, c)
    for m in modes.split():
        runs = [json.loads(l) for l in open(os.path.join(out, f"{c}.{m}.jsonl"))]
        pw = statistics.median(r["bytes"] / 1e6 / r["seconds"][0] for r in runs)
        how = "written together" if m == "together" else "one after another"
        print(f"| {label}, {how} | {runs[0]['bytes']} | {pw:.0f} | {ddm:.0f} | {pw / ddm:.2f} |")
print(f"\nmachine load (1-minute average) {load_before} before, {load_after} after, on "
      f"{os.cpu_count()} cores; target ratio >= 0.70")
PY
