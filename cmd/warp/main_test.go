package main

import (
	"errors"
	"testing"
)

// TestTourCPU runs every registered tour part on the CPU backend, so the
// README's main command is exercised by CI.
func TestTourCPU(t *testing.T) {
	if err := runTour([]string{"--backend", "cpu"}); err != nil {
		t.Fatal(err)
	}
}

func TestDevicesWithoutFlagsSucceeds(t *testing.T) {
	// With or without a GPU, listing devices is not an error.
	if err := runDevices(nil); err != nil {
		t.Fatal(err)
	}
}

func TestUsageErrors(t *testing.T) {
	if err := runTour([]string{"--backend", "tpu"}); !errors.Is(err, errUsage) {
		t.Errorf("bad backend: %v", err)
	}
	if err := runBench([]string{"no-such-structure"}); !errors.Is(err, errUsage) {
		t.Errorf("unknown bench: %v", err)
	}
	if err := runBench(nil); !errors.Is(err, errUsage) {
		t.Errorf("bench without a structure: %v", err)
	}
}
