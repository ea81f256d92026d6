#!/usr/bin/env bash
# Installs what is missing, then configures and builds pipeworks (Release) into build/: every
# target, or only PIPEWORKS_TARGET when that is set (scripts/test.sh: pipeworks_check).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs="${PIPEWORKS_JOBS:-$(nproc)}"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" | grep -v -E "^-- (Detecting|Check for working|Looking for|Performing Test|Found Threads)"
cmake --build build -j "$jobs" ${PIPEWORKS_TARGET:+--target "$PIPEWORKS_TARGET"}
