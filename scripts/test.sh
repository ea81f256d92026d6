#!/usr/bin/env bash
# Quick start, command two: set up, build what the tests need (not the benchmarks), and run the
# whole test suite through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
PIPEWORKS_TARGET=pipeworks_check scripts/build.sh
ctest --test-dir build --output-on-failure -j "${PIPEWORKS_JOBS:-$(nproc)}" "$@"
