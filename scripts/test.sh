#!/usr/bin/env bash
# Runs every check CI runs: vet, the tests, and the race detector (which needs
# cgo; the library itself stays cgo-free). GPU tests skip where there is no GPU.
# bench/peers, a module of its own (it compares kv with Pebble, goleveldb and
# Badger), is vetted and tested too, so that it cannot rot unnoticed.
# Extra arguments are passed to both `go test ./...` runs of the main module
# (e.g. -run TestX).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== go vet ./..."
go vet ./...

echo "== CGO_ENABLED=0 go build ./..."
CGO_ENABLED=0 go build ./...

echo "== go test ./..."
go test "$@" ./...

echo "== (cd bench/peers && go vet ./... && go test ./...)"
(cd bench/peers && go vet ./... && go test ./...)

echo "== CGO_ENABLED=1 go test -race -short ./..."
CGO_ENABLED=1 go test -race -short "$@" ./...

echo "all checks passed"
