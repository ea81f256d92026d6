#!/usr/bin/env bash
# Installs the Debian packages pipeworks needs to build, test and run its demos.
# Runs apt-get update only when a package is missing; does nothing when all are present.
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libcaf-dev libtbb-dev libucx-dev ucx-utils catch2
  libopenblas-dev nlohmann-json3-dev libcli11-dev zlib1g-dev libssl-dev
  fortunes dataset-fashion-mnist
)
# Extra packages a caller may ask for (the benchmark script asks for python3-torch); --browser
# adds what scripts/explorer-test.sh needs (headless Chromium, its driver, Selenium). Never by
# default: they are large and only the explorer's browser tests use them.
for arg in "$@"; do
  if [ "$arg" = --browser ]; then packages+=(chromium chromium-driver python3-selenium)
  else packages+=("$arg"); fi
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "pipeworks: installing missing Debian packages: ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo_cmd=(sudo); else
    echo "pipeworks: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
"${sudo_cmd[@]}" apt-get update -qq
# env inside sudo: sudo resets the environment, so a variable set before it would not reach apt-get.
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
