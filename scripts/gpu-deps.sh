#!/usr/bin/env bash
# A GPU build where the CUDA toolkit is but Debian's libraries are not (the lent GPU machines:
# CUDA, CMake and ninja, no CAF, oneTBB, OpenBLAS, UCX, CLI11, nlohmann-json or Catch2, and no
# package registry). Two steps, one on each machine:
#   scripts/gpu-deps.sh gather [DIR]   on Debian 12 (here): downloads the .deb files into DIR (.debs)
#   scripts/gpu-deps.sh build [DIR [TARGET...]]   there: unpacks them with dpkg -x into DIR/root,
#                                      configures build-gpu/ against that prefix and builds it (or
#                                      only the targets named): one command
# Then: source build-gpu/env.sh (the libraries' path) and run build-gpu/bin/... as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}" dir="${2:-.debs}"
targets=("${@:3}")
arch=x86_64-linux-gnu

# What pipeworks links and includes, with the run-time libraries they need that a CUDA image
# may lack (the C and C++ runtimes are assumed there).
packages=(
  libcaf-dev libcaf-core0.17 libcaf-io0.17 libcaf-openssl0.17
  libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libhwloc15
  libopenblas-dev libopenblas-pthread-dev libopenblas0 libopenblas0-pthread libgfortran5
  libucx-dev libucx0 libnuma1 libibverbs1 librdmacm1
  libcli11-dev nlohmann-json3-dev catch2 zlib1g-dev libssl-dev libssl3
)

case "$mode" in
  gather)
    mkdir -p "$dir"
    # Download only: no root needed, nothing installed here. apt-get update if the lists are old.
    (cd "$dir" && apt-get download "${packages[@]}" 2>/dev/null) ||
      { apt-get update -qq && (cd "$dir" && apt-get download "${packages[@]}"); }
    du -sh "$dir"
    echo "gathered ${#packages[@]} packages into $dir; on the GPU machine: scripts/gpu-deps.sh build $dir"
    ;;
  build)
    [ -d "$dir" ] && ls "$dir"/*.deb > /dev/null 2>&1 ||
      { echo "gpu-deps: no .deb files in $dir: run 'scripts/gpu-deps.sh gather $dir' on Debian 12 first" >&2; exit 1; }
    root="$(realpath "$dir")/root"
    rm -rf "$root" && mkdir -p "$root"
    for f in "$dir"/*.deb; do dpkg -x "$f" "$root"; done
    lib="$root/usr/lib/$arch"
    # OpenBLAS's and UCX's CMake files name /usr absolutely (the others compute their prefix), and
    # Debian picks OpenBLAS's flavour through alternatives, which dpkg -x does not set up: point
    # them at the unpacked files, OpenBLAS at its pthread flavour.
    blas="$lib/openblas-pthread/cmake/openblas"
    sed -i "s|/usr/|$root/usr/|g" "$blas/OpenBLASConfig.cmake"
    sed -i "s|set(prefix \"/usr\")|set(prefix \"$root/usr\")|" "$lib/cmake/ucx/ucx-targets.cmake"
    generator=()
    command -v ninja > /dev/null && generator=(-G Ninja)
    cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$root/usr;$lib/cmake" -DOpenBLAS_DIR="$blas" \
      -DCAF_ROOT="$root/usr" -DCMAKE_INCLUDE_PATH="$root/usr/include" -DCMAKE_LIBRARY_PATH="$lib" \
      -DPIPEWORKS_BUILD_BENCH="${PIPEWORKS_BUILD_BENCH:-ON}"
    echo "export LD_LIBRARY_PATH=\"$lib:$lib/openblas-pthread\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\"" \
      > build-gpu/env.sh
    # The tests find the binaries' libraries through the same variable.
    # shellcheck disable=SC1091
    source build-gpu/env.sh
    cmake --build build-gpu -j "$(nproc)" ${targets[@]+--target "${targets[@]}"}
    echo "built build-gpu/; first: source build-gpu/env.sh"
    ;;
  *)
    echo "usage: scripts/gpu-deps.sh gather [DIR] | build [DIR [TARGET...]]   (DIR defaults to .debs)" >&2
    exit 2
    ;;
esac
