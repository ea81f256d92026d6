#!/usr/bin/env bash
# Sends truncated, random and oversized-header frames to a worker's port and reports whether the
# worker survived and how much its memory grew (the issue asks: no crash, no growth).
# Usage: scripts/hostile-frames.sh [FRAMES]   (PIPEWORKS_BIN_DIR: default build/bin)
# CAF 0.17.6's BASP reads a header and then allocates the payload length it claims (up to 4 GiB);
# the worker's frame guard (runtime/transport/frame_guard) refuses such headers before CAF sees
# them. ctest's tests/cli/worker_frames_test.cpp does the same with 100,000 frames.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${PIPEWORKS_BIN_DIR:-build/bin}/pipeworks"
frames="${1:-3000}"
out="$(mktemp)"
"$bin" worker --listen 127.0.0.1:0 > "$out" 2>/dev/null &
worker=$!
trap 'kill -9 $worker 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 1 500); do grep -q "listening on" "$out" && break; sleep 0.01; done
port=$(awk '/listening on/ {print $NF}' "$out"); port=${port##*:}
rss() { awk '/VmRSS/ {print $2}' /proc/$worker/status; }
before=$(rss)
python3 - "$port" "$frames" <<'PY'
import random, socket, struct, sys
port, frames = int(sys.argv[1]), int(sys.argv[2])
random.seed(1)
for i in range(frames):
    s = socket.create_connection(("127.0.0.1", port))
    kind = i % 4
    if kind == 0:   # random bytes, shorter than a header
        data = random.randbytes(random.randint(1, 40))
    elif kind == 1: # random bytes, longer
        data = random.randbytes(random.randint(40, 4096))
    elif kind == 2: # zeros
        data = bytes(random.randint(1, 200))
    else:           # a header claiming a payload of almost 4 GiB
        data = struct.pack(">B3xIQ", random.randint(0, 8), 0xFFFFFFF0, 0) + bytes(64)
    try:
        s.sendall(data)
    except OSError:
        pass
    s.close()
PY
sleep 1
if ! kill -0 $worker 2>/dev/null; then echo "the worker died"; exit 1; fi
after=$(rss)
echo "worker alive after $frames frames; RSS ${before} KiB -> ${after} KiB"
