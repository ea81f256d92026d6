#!/usr/bin/env bash
# Quick start, command two: set up, build, and run the whole test suite through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j "${PIPEWORKS_JOBS:-$(nproc)}" "$@"
