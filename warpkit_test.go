package warpkit

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestBackendText(t *testing.T) {
	for _, b := range []Backend{Auto, CPU, CUDA} {
		got, err := ParseBackend(b.String())
		if err != nil || got != b {
			t.Errorf("%v: parsed back as %v, %v", b, got, err)
		}
	}
	for in, want := range map[string]Backend{"": Auto, "GPU": CUDA, " Cpu ": CPU} {
		if got, err := ParseBackend(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseBackend("tpu"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("tpu: %v", err)
	}
	var cfg struct{ Backend Backend }
	if err := json.Unmarshal([]byte(`{"Backend":"cuda"}`), &cfg); err != nil || cfg.Backend != CUDA {
		t.Errorf("json: %v %v", cfg.Backend, err)
	}
	if s := Backend(9).String(); s != "Backend(9)" {
		t.Errorf("unknown backend prints %q", s)
	}
}

func TestOpenDevice(t *testing.T) {
	d, err := OpenDevice(CPU, 0)
	if d != nil || err != nil {
		t.Fatalf("CPU: %v %v", d, err)
	}
	d, err = OpenDevice(Auto, 0)
	if err != nil {
		t.Fatalf("Auto must fall back to the CPU without a device: %v", err)
	}
	if d == nil {
		// No GPU here: CUDA must say so.
		if _, err := OpenDevice(CUDA, 0); !errors.Is(err, ErrNoDevice) {
			t.Fatalf("CUDA without a device: %v", err)
		}
		return
	}
	defer d.Close()
	if _, err := OpenDevice(CUDA, 99); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("CUDA ordinal 99: %v", err)
	}
}
