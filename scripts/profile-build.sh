#!/usr/bin/env bash
# profile-build.sh builds the warp CLI with kernels that carry line info, for
# Nsight Compute's source view (ncu --page source --print-source cuda), from
# a copy of the working tree in /tmp/warpkit-prof (the PTX names its sources
# by that path). The committed PTX is left alone.
#
#   scripts/profile-build.sh [-o .gpu-NAME] [package ...]   (default: every package with kernels)
#
# It writes OUT/warp_lineinfo (OUT defaults to .gpu). On the device machine,
# point the recorded path at the repository before running ncu:
#
#   ln -sfn "$PWD" /tmp/warpkit-prof
#   ncu --import-source yes --kernel-name mvb_insert_u32_u32 --launch-skip 28 --launch-count 1 \
#       --section SourceCounters --section WarpStateStats -o rep .gpu/warp_lineinfo bench mvbtree --sizes 16M
#   ncu -i rep.ncu-rep --page source --csv --print-source cuda,sass > lines.csv
#
# cuda.LoadModule asks the driver's JIT to keep the line info of such PTX.
# --print-source cuda,sass gives every source line (a "Line No" row with the
# line's totals: warp-stall samples, instructions executed, ...) followed by
# its SASS with the same columns; --print-source sass the SASS alone. (Shown
# to work on the H200, 2026-12-02; --print-source cuda alone prints the source
# without metrics.) docs/benchmarks.md, "btree and mvbtree: what the writers
# spend their time on", reads such a profile.
# Needs nvcc (scripts/install-cuda-toolkit.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

out=.gpu
if [ "${1:-}" = "-o" ]; then
	out=${2:?-o needs a folder}
	shift 2
fi
case "$out" in
	.gpu|.gpu-*) ;;
	*) echo "profile-build.sh: the output folder must be .gpu or .gpu-NAME (git-ignored)" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || set -- ./...

copy=/tmp/warpkit-prof
rm -rf "$copy"
mkdir -p "$copy"
# the working tree as it is: tracked files and untracked ones git does not ignore
git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$copy"
root=$(pwd)
(
	cd "$copy"
	export WARPKIT_KERNELGEN_LINEINFO=1 CGO_ENABLED=0
	go generate -run 'internal/kernelgen ' "$@"
	mkdir -p "$root/$out"
	go build -ldflags="-s -w" -o "$root/$out/warp_lineinfo" ./cmd/warp
)
echo "built $out/warp_lineinfo (kernels with line info; sources at $copy)"
