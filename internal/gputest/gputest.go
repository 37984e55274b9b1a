// Package gputest is the shared helper for tests that need a CUDA device: they
// skip, not fail, where there is none, so `go test ./...` passes everywhere.
package gputest

import (
	"errors"
	"testing"

	"github.com/warpkit/warpkit/cuda"
)

// Device opens device 0 for the test and closes it at cleanup, or skips the
// test with "no CUDA device" when there is none. Other errors fail the test.
func Device(t testing.TB) *cuda.Device {
	t.Helper()
	d, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoDevice) {
		t.Skip("no CUDA device")
	}
	if err != nil {
		t.Fatalf("opening CUDA device 0: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
