#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang-14, ASan + UBSan, into build-fuzz/) and runs them.
# Usage: scripts/fuzz.sh list | scripts/fuzz.sh TARGET|all SECONDS [libFuzzer flags, e.g. -runs=N]
set -euo pipefail
cd "$(dirname "$0")/.."

targets=()
for f in fuzz/*.cpp; do targets+=("$(basename "$f" .cpp)"); done

usage() {
  echo "usage: scripts/fuzz.sh list | scripts/fuzz.sh TARGET|all SECONDS [libFuzzer flags]" >&2
  echo "targets: ${targets[*]}" >&2
  exit 2
}

# Configures build-fuzz (again each time, so that a new fuzz/*.cpp is a target), then (re)builds
# the named fuzz_* executables. Without CUDA: the readers fuzzed need none, and nvcc's host
# compiler (gcc) does not take clang's -fsanitize=fuzzer-no-link.
build() {
  scripts/install-deps.sh clang-14 libclang-rt-14-dev  # libFuzzer and the sanitizers' runtimes
  mkdir -p build-fuzz
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release \
    -DPIPEWORKS_FUZZ=ON -DPIPEWORKS_BUILD_TESTS=OFF -DPIPEWORKS_BUILD_BENCH=OFF \
    -DPIPEWORKS_CUDA=OFF \
    > build-fuzz/configure.log 2>&1 || { tail -20 build-fuzz/configure.log >&2; exit 1; }
  cmake --build build-fuzz -j "${PIPEWORKS_JOBS:-$(nproc)}" --target "$@"
}

# Runs one target over a copy of fuzz/corpus/<target> (new inputs land in the copy); crashes,
# leaks, hangs and out-of-memory inputs are saved in build-fuzz/runs/<target>/. Returns 1 when
# it found something.
run() {
  local name=$1 secs=$2
  shift 2
  local dir=build-fuzz/runs/$name
  rm -rf "$dir" && mkdir -p "$dir/corpus"
  cp -r "fuzz/corpus/$name/." "$dir/corpus/"
  local rc=0
  UBSAN_OPTIONS=print_stacktrace=1 "build-fuzz/bin/fuzz_$name" -max_total_time="$secs" \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$dir/" "$@" "$dir/corpus" \
    >"$dir/log" 2>&1 || rc=$?
  local execs
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  local found
  found=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o \
    -name 'timeout-*' -o -name 'oom-*' -o -name 'slow-unit-*' \) | sort)
  if [ "$rc" -eq 0 ] && [ -z "$found" ]; then
    echo "fuzz_$name: ${execs:-?} executions, nothing found"
    return 0
  fi
  echo "fuzz_$name: ${execs:-?} executions, FOUND something (exit $rc), log: $dir/log"
  [ -n "$found" ] && echo "$found" | sed 's/^/  /'
  grep -m1 -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:" "$dir/log" | sed 's/^/  /' || true
  return 1
}

[ $# -ge 1 ] || usage
if [ "$1" = list ]; then
  printf '%s\n' "${targets[@]}"
  exit 0
fi
[ $# -ge 2 ] || usage
which=$1 secs=$2
shift 2
[[ "$secs" =~ ^[0-9]+$ ]] || usage
if [ "$which" = all ]; then
  build "${targets[@]/#/fuzz_}"
  failed=0
  for t in "${targets[@]}"; do run "$t" "$secs" "$@" || failed=1; done
  exit "$failed"
fi
[ -f "fuzz/$which.cpp" ] || usage
build "fuzz_$which"
run "$which" "$secs" "$@"
