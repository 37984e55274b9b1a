#!/usr/bin/env bash
# Builds every package's test binary and the warp CLI into .gpu/ (git-ignored),
# plus .gpu/run.sh, for running on a GPU machine that has no Go toolchain:
#
#   scripts/gpu-test.sh                  # here: every package
#   scripts/gpu-test.sh -o .gpu-hash ./slabhash ./slaballoc   # here: some packages, another folder
#   scripts/gpu-test.sh -z ./mvbtree     # here: also gzip the folder into .gpu-pack/gpu.tgz
#   scripts/gpu-test.sh -p ./kv          # here: also build bench/peers (its own module) as .gpu/peers
#   tar xzf .gpu-pack/gpu.tgz            # there, when only the archive was sent (a copy with
#                                        # a size limit: the binaries shrink to about a third)
#   .gpu/run.sh                          # there: every test binary, verbosely
#   .gpu/run.sh cuda slabhash            # only these packages
#   TESTFLAGS='-test.run GPU' .gpu/run.sh
#   LOGDIR=$OUT .gpu/run.sh              # logs (one per package) somewhere else
#
# run.sh runs each binary in its package directory (as `go test` does), so it
# must be run from a copy of the repository; it ends with a pass/fail summary
# and exits non-zero if any package failed.
set -euo pipefail
cd "$(dirname "$0")/.."

out=.gpu
pack=false
peers=false
while [ $# -gt 0 ]; do
	case "$1" in
		-o) out=${2:?-o needs a folder}; shift 2 ;;
		-z) pack=true; shift ;;
		-p) peers=true; shift ;;
		*) break ;;
	esac
done
case "$out" in
	.gpu|.gpu-*) ;;
	*) echo "gpu-test.sh: the output folder must be .gpu or .gpu-NAME (git-ignored)" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || set -- ./...

# Stamp the commit into every binary: benchmark reports print it, and Go's own
# VCS stamping is off for test binaries (and wherever GOFLAGS=-buildvcs=false).
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain 2>/dev/null)" ] || commit="$commit+dirty"
ldflags="-s -w -X github.com/warpkit/warpkit/internal/benchfmt.stampedCommit=$commit"

rm -rf "$out"
mkdir -p "$out"
export CGO_ENABLED=0

pkgs=$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "$@")
root=$(pwd)
: > "$out/tests.txt"
while read -r pkg dir; do
	[ -n "$pkg" ] || continue
	rel=${dir#"$root"}
	rel=${rel#/}
	[ -n "$rel" ] || rel=.
	name=$(echo "${rel}" | tr '/' '_')
	[ "$name" = "." ] && name=warpkit
	go test -c -ldflags="$ldflags" -o "$out/${name}.test" "$pkg"
	echo "${name} ${rel}" >> "$out/tests.txt"
done <<< "$pkgs"

if [ "$*" = "./..." ]; then
	go build -ldflags="$ldflags" -o "$out/warp" ./cmd/warp
elif ! go build -ldflags="$ldflags" -o "$out/warp" ./cmd/warp 2>/dev/null; then
	echo "gpu-test.sh: note: cmd/warp does not build right now; $out/warp left out" >&2
fi
# bench/peers is a module of its own, for which Go records no VCS stamp:
# the link-time stamp names the commit in its reports.
if $peers; then
	(cd bench/peers && go build -ldflags="$ldflags" -o "$root/$out/peers" .)
fi

cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the test binaries listed in tests.txt; see scripts/gpu-test.sh.
set -uo pipefail
gpu=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$gpu")
logdir=${LOGDIR:-$gpu/logs}
mkdir -p "$logdir"
want=" $* "
pass=() fail=()
while read -r name rel; do
	if [ $# -gt 0 ] && [[ "$want" != *" $name "* ]] && [[ "$want" != *" $rel "* ]]; then continue; fi
	echo "=== package $rel"
	( cd "$root/$rel" && "$gpu/$name.test" -test.v ${TESTFLAGS:-} ) 2>&1 | tee "$logdir/$name.log"
	if [ "${PIPESTATUS[0]}" -eq 0 ]; then pass+=("$rel"); else fail+=("$rel"); fi
done < "$gpu/tests.txt"
echo
echo "=== summary: ${#pass[@]} passed, ${#fail[@]} failed"
for p in "${pass[@]}"; do echo "PASS $p"; done
for f in "${fail[@]}"; do echo "FAIL $f"; done
[ ${#fail[@]} -eq 0 ]
RUN
chmod +x "$out/run.sh"
echo "built $(wc -l < "$out/tests.txt") test binaries and the warp CLI in $out/; run $out/run.sh on the GPU machine"
if $pack; then
	mkdir -p .gpu-pack
	archive=.gpu-pack/${out#.}.tgz
	tar czf "$archive" "$out"
	echo "packed $out into $archive ($(du -h "$archive" | cut -f1)); there: tar xzf $archive && $out/run.sh"
fi
