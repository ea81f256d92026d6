#!/usr/bin/env bash
# Builds pipeworks with ASan + UBSan (build-asan/, the whole ctest suite) and with TSan (build-tsan/,
# the actor tests). Exits non-zero when a test fails or any sanitizer reports.
# Usage: scripts/sanitize.sh [asan|tsan]   (both when none is named; ctest arguments in CTEST_ARGS)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scripts/install-deps.sh
jobs="${PIPEWORKS_JOBS:-$(nproc)}"
common="-fno-omit-frame-pointer -g"

# configure DIR SANITIZE_FLAGS: scripts/build.sh's Release configuration (-O3) plus the flags,
# without the benchmarks, which no test runs.
configure() {
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS="$2 $common" -DCMAKE_EXE_LINKER_FLAGS="$2" -DPIPEWORKS_BUILD_BENCH=OFF \
    "${@:3}" |
    grep -v -E "^-- (Detecting|Check for working|Looking for|Performing Test|Found Threads)"
}

# Every process a test starts writes its reports to DIR/<sanitizer>.<pid> (so a report from a
# child the test runs is seen too); prints them and fails when there are any.
reports() {
  local dir=$1 files
  files=$(find "$dir" -type f | sort)
  [ -z "$files" ] && return 0
  for f in $files; do echo "=== $f"; cat "$f"; done
  echo "sanitize.sh: $(echo "$files" | wc -l) sanitizer report file(s) in $dir" >&2
  return 1
}

asan() {
  local flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined" rc=0
  configure build-asan "$flags" || return 1
  cmake --build build-asan -j "$jobs" || return 1
  local logs=$root/build-asan/sanitizer-reports
  rm -rf "$logs" && mkdir -p "$logs"
  # CXXFLAGS/LDFLAGS: the install test builds examples/embed_project against these libraries.
  ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1" \
  UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1" \
  CXXFLAGS="$flags" LDFLAGS="$flags" \
    ctest --test-dir build-asan -j "$jobs" --output-on-failure ${CTEST_ARGS:-} || rc=1
  reports "$logs" || rc=1
  echo "sanitize.sh: ASan + UBSan, whole suite: $([ $rc -eq 0 ] && echo PASS || echo FAIL)"
  return $rc
}

# Debian's libcaf and libtbb are not built with TSan, which then cannot see a CAF mailbox or a
# TBB task hand data over and reports each handover as a race (hundreds per test, none of them in
# libcaf alone, so no suppression file could single them out). The TSan build links CAF 0.17.6
# and oneTBB 2021.8.0 (Debian's versions) built with -fsanitize=thread under build-tsan/{caf,tbb}.
# OpenBLAS stays uninstrumented: TSan does not see its threads' accesses.

# sources DIR TAG URL: DIR holds the sources (CAF_SOURCE_DIR, TBB_SOURCE_DIR), or a clone of URL
# at TAG goes there.
sources() {
  [ -f "$1/CMakeLists.txt" ] && return 0
  git clone --quiet --depth 1 --branch "$2" "$3" "$1" && return 0
  echo "sanitize.sh: TSan needs the sources of $3 at tag $2 in $1" \
    "(set CAF_SOURCE_DIR or TBB_SOURCE_DIR to a checkout)" >&2
  return 1
}

# instrumented NAME SRC [cmake options]: builds and installs NAME into build-tsan/NAME once.
instrumented() {
  local name=$1 src=$2
  shift 2
  [ -f "$root/build-tsan/$name/.installed" ] && return 0
  cmake -S "$src" -B "build-tsan/$name-build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$root/build-tsan/$name" "$@" >/dev/null || return 1
  cmake --build "build-tsan/$name-build" -j "$jobs" || return 1
  cmake --install "build-tsan/$name-build" >/dev/null && touch "$root/build-tsan/$name/.installed"
}

deps_tsan() {
  local caf_src=${CAF_SOURCE_DIR:-$root/build-tsan/caf-src}
  local tbb_src=${TBB_SOURCE_DIR:-$root/build-tsan/tbb-src}
  sources "$caf_src" 0.17.6 https://github.com/actor-framework/actor-framework || return 1
  sources "$tbb_src" v2021.8.0 https://github.com/oneapi-src/oneTBB || return 1
  # -include limits: 0.17.6's receive_buffer.hpp uses std::numeric_limits without it.
  instrumented caf "$caf_src" -DCMAKE_CXX_FLAGS="-fsanitize=thread $common -include limits" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes \
    -DCAF_NO_OPENSSL=yes -DCAF_NO_TOOLS=yes -DCAF_NO_PYTHON=yes -DCAF_NO_OPENCL=yes \
    -DCAF_NO_SUMMARY=yes || return 1
  instrumented tbb "$tbb_src" -DTBB_SANITIZE=thread -DCMAKE_CXX_FLAGS="$common" -DTBB_TEST=OFF \
    -DTBBMALLOC_BUILD=OFF -DTBB_STRICT=OFF
}

tsan() {
  local rc=0 caf=$root/build-tsan/caf
  deps_tsan || return 1
  configure build-tsan "-fsanitize=thread" -DCAF_INCLUDE_DIR="$caf/include" \
    -DCAF_CORE_LIBRARY="$caf/lib/libcaf_core.so" -DCAF_IO_LIBRARY="$caf/lib/libcaf_io.so" \
    -DTBB_DIR="$root/build-tsan/tbb/lib/cmake/TBB" || return 1
  cmake --build build-tsan -j "$jobs" --target pipeworks_tests_actors pipeworks_tests_transport || return 1
  local logs=$root/build-tsan/sanitizer-reports
  rm -rf "$logs" && mkdir -p "$logs"
  # Only pipeworks_tests_actors and _transport are built: the other test binaries' placeholders
  # (*_NOT_BUILT*) and the install test are left out. UCX's memory hooks (libucm intercepts
  # madvise, which a new thread's start calls) crash under TSan's interceptors: they are off.
  UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no \
  TSAN_OPTIONS="log_path=$logs/tsan:second_deadlock_stack=1" \
    ctest --test-dir build-tsan -j "$jobs" --output-on-failure \
      -E "_NOT_BUILT|install_package_builds_embed_service" ${CTEST_ARGS:-} || rc=1
  reports "$logs" || rc=1
  echo "sanitize.sh: TSan, actor and transport tests: $([ $rc -eq 0 ] && echo PASS || echo FAIL)"
  return $rc
}

case "${1:-all}" in
  asan) asan ;;
  tsan) tsan ;;
  all)
    rc=0
    asan || rc=1
    tsan || rc=1
    exit $rc
    ;;
  *) echo "usage: scripts/sanitize.sh [asan|tsan]" >&2; exit 2 ;;
esac
