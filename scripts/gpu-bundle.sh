#!/usr/bin/env bash
# Packs this machine's build for a GPU machine that has CUDA but not Debian's libraries: stripped
# binaries, the shared libraries they load from outside the toolkit and the base system (CAF,
# oneTBB, OpenBLAS, UCX with its modules, ...), ucx_perftest, the fortunes text and the given
# scripts, in one .tar.xz. There: tar -xJf B.tar.xz -C DIR && source DIR/env.sh.
# Usage: scripts/gpu-bundle.sh OUT.tar.xz [SCRIPT...]
#   (BIN=build/bin; BINARIES="pipeworks pipeworks_tests_ops ..." to choose, default all of BIN)
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,7p "$0" >&2; exit 2; }
out=$(realpath -m "$1"); shift
cd "$(dirname "$0")/.."
bin="${BIN:-build/bin}"
[ -d "$bin" ] || { echo "gpu-bundle: $bin does not exist: build first (scripts/build.sh)" >&2; exit 1; }
names=${BINARIES:-$(cd "$bin" && ls)}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/fortunes"

# The base system and the CUDA toolkit are there already; everything else a binary loads comes.
base='^(linux-vdso|ld-linux|libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libz|libcrypto)\.'
copy_libs() {
  ldd "$1" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ "$name" =~ $base ]] && continue
    [[ "$path" == /usr/local/cuda* ]] && continue
    [ -e "$stage/lib/$name" ] || cp -L "$path" "$stage/lib/$name"
  done
}
for n in $names; do
  [ -x "$bin/$n" ] || { echo "gpu-bundle: $bin/$n is not an executable" >&2; exit 1; }
  strip -o "$stage/bin/$n" "$bin/$n"
  copy_libs "$bin/$n"
done
if command -v ucx_perftest > /dev/null; then
  cp "$(command -v ucx_perftest)" "$stage/bin/"
  copy_libs "$(command -v ucx_perftest)"
fi
# UCX loads its transports from the ucx/ folder beside libucs.
ucx_modules=$(dirname "$(ldconfig -p | awk '/libucs.so.0 / {print $NF; exit}')")/ucx
[ -d "$ucx_modules" ] && cp -rL "$ucx_modules" "$stage/lib/ucx"
find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' \
  -exec cp {} "$stage/fortunes/" \; 2>/dev/null || true
for s in "$@"; do cp "$s" "$stage/"; done
cat > "$stage/env.sh" <<'EOF'
# Source this: the bundle's binaries and libraries first, then CUDA's.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH="$here/bin:$PATH"
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
EOF
tar -cJf "$out" -C "$stage" .
echo "gpu-bundle: $(du -h "$out" | cut -f1) in $out ($(ls "$stage/bin" | wc -l) binaries, $(ls "$stage/lib" | wc -l) libraries)"
