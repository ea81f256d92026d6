#!/usr/bin/env bash
# Checks the installed package the way a user meets it: installs BUILD_DIR into a temporary
# prefix, builds examples/embed_project (find_package(pipeworks), pipeworks::pipeworks) out of
# tree against that prefix alone, and runs the program for a few steps.
#   scripts/test-install.sh BUILD_DIR [STEPS]
set -euo pipefail
if [[ $# -lt 1 || ! -f "$1/CMakeCache.txt" ]]; then
  echo "usage: scripts/test-install.sh BUILD_DIR [STEPS]  (BUILD_DIR: a configured, built tree)" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
steps=${2:-3}
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/pipeworks-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== install $build into $work/prefix"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/pipeworks/actors/pipeline.hpp"

# The same compiler as the build; nothing from the source or build tree on any search path.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
echo "== configure examples/embed_project against the prefix"
cmake -S "$src/examples/embed_project" -B "$work/embed" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
echo "== build"
cmake --build "$work/embed" -j2
echo "== run embed_service --steps $steps"
"$work/embed/embed_service" --steps "$steps"
echo "== install package OK"
