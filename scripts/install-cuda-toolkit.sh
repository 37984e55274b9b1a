#!/usr/bin/env bash
# Installs nvcc (Debian's nvidia-cuda-toolkit, CUDA 11.8, which ships CUB) so that
# `go generate ./...` can rebuild the embedded PTX. Only needed to change kernels:
# building and using warpkit needs no CUDA toolkit.
#
# Idempotent: enables Debian's non-free component when it is missing, installs the
# package when nvcc is absent, and prints the nvcc version.
set -euo pipefail

if command -v nvcc >/dev/null 2>&1; then
	nvcc --version | tail -n 2
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# non-free as a whole word: Debian 12's default "non-free-firmware" does not count.
has_nonfree() {
	grep -rqsE '^[^#]*(Components:|deb ).*[[:space:]]non-free([[:space:]]|$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}

if ! has_nonfree; then
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		# deb822 format: add non-free (and contrib) to every Components line that lacks it.
		$SUDO sed -i -E '/^Components:/{/non-free([^-]|$)/!s/$/ contrib non-free/}' /etc/apt/sources.list.d/debian.sources
	elif [ -f /etc/apt/sources.list ]; then
		$SUDO sed -i -E '/^deb /{/non-free([^-]|$)/!s/$/ contrib non-free/}' /etc/apt/sources.list
	else
		echo "install-cuda-toolkit: no apt sources found; add Debian's non-free component by hand" >&2
		exit 1
	fi
fi

# env, not export: sudo resets the environment.
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nvidia-cuda-toolkit >/dev/null
nvcc --version | tail -n 2
