package cuda

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadID is the calling OS thread's id.
func threadID() int { return syscall.Gettid() }

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestGPUWaitSleeps: the primary context waits with blocking
// synchronization, and a long Synchronize leaves its processor free: past
// the poll window the waiting thread sleeps in the driver rather than
// spinning (the driver's default scheduling spins while a process has
// fewer contexts than logical processors).
func TestGPUWaitSleeps(t *testing.T) {
	d := gpu(t)
	var flags uint32
	var active int32
	if err := check(d.st.drv, "cuDevicePrimaryCtxGetState", d.st.drv.primaryCtxGetState(d.st.dev, &flags, &active)); err != nil {
		t.Fatal(err)
	}
	if flags&7 != ctxSchedBlockingSync || active != 1 {
		t.Fatalf("primary context flags %#x, active %d: want blocking sync (%#x), active", flags, active, ctxSchedBlockingSync)
	}
	fill := kernel(t, d, "fill_u64")
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 1 << 27 // 1 GiB of uint64: a fraction of a millisecond a launch
	buf, err := Alloc[uint64](d, n)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	// Queue launches until the queue holds well past the poll window of
	// work, then time the wait's wall and its thread's CPU.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for launches := 64; ; launches *= 2 {
		for i := range launches {
			if err := fill.Launch(D1(4096), D1(256), 0, s, buf, uint64(i), uint64(n)); err != nil {
				t.Fatal(err)
			}
		}
		start, cpu := time.Now(), threadCPU(t)
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		wall, used := time.Since(start), threadCPU(t)-cpu
		if wall < 50*time.Millisecond && launches < 1<<14 {
			continue // the device ran the queue too fast to tell
		}
		t.Logf("%d launches: wait %v, its thread's CPU %v", launches, wall, used)
		if used > wall/4 {
			t.Fatalf("a %v wait used %v of its thread's CPU: the wait spins", wall, used)
		}
		return
	}
}
