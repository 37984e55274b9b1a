package procmem

import (
	"errors"
	"runtime"
	"testing"
)

func TestParseStatus(t *testing.T) {
	st := []byte("Name:\twarp\nVmPeak:\t  900 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\nThreads:\t4\n")
	peak, cur, err := parseStatus(st)
	if err != nil || peak != 2048<<10 || cur != 1024<<10 {
		t.Fatalf("parseStatus: %d, %d, %v", peak, cur, err)
	}
	if _, _, err := parseStatus([]byte("VmRSS:\t1 kB\n")); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("no VmHWM: %v", err)
	}
	if _, _, err := parseStatus([]byte("VmHWM:\t1 MB\nVmRSS:\t1 kB\n")); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a unit other than kB: %v", err)
	}
}

// TestPeakWindow: a 64 MiB buffer touched inside the window raises the
// peak above the resident set the window started from; a new window opened
// after the buffer is dropped starts from the resident set of that moment,
// not from the old peak. (Whether the runtime and the kernel give the
// buffer's pages back at once is theirs to decide: CI's machines have kept
// half of it resident, so the test compares the new peak with the resident
// set read beside it, not with the buffer's size.)
func TestPeakWindow(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	if err := ResetPeak(); err != nil {
		t.Skip(err)
	}
	_, start, err := Peak()
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	buf := make([]byte, size)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	peak, _, err := Peak()
	if err != nil {
		t.Fatal(err)
	}
	if peak < start+size*3/4 {
		t.Fatalf("peak %d after touching %d bytes from %d", peak, size, start)
	}
	runtime.KeepAlive(buf)
	buf = nil
	runtime.GC()
	if err := ResetPeak(); err != nil {
		t.Fatal(err)
	}
	low, cur, err := Peak()
	if err != nil {
		t.Fatal(err)
	}
	// The reset sets the mark to the resident set; reading the status
	// file allocates a little, so allow a few MiB above it.
	const slack = 8 << 20
	if low > cur+slack || low > peak {
		t.Fatalf("after the reset: peak %d, resident %d (the window's old peak was %d)", low, cur, peak)
	}
	t.Logf("start %d, peak %d, after the reset: peak %d, resident %d", start, peak, low, cur)
}
