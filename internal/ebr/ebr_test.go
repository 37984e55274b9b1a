package ebr

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func TestGracePeriod(t *testing.T) {
	var e Epochs[string]
	reader := e.Begin() // runs beside the writer
	writer := e.Begin()
	e.End(writer, "a", "b")
	if got := e.Reclaim(); got != nil {
		t.Fatalf("reclaimed %v while a launch that ran beside the writer is in flight", got)
	}
	later := e.Begin() // starts after the writer ended: cannot reach a or b
	e.End(reader)
	if got := e.Reclaim(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after the reader ended: %v, want [a b]", got)
	}
	w2 := e.Begin()
	e.End(w2, "c")
	if got := e.Reclaim(); got != nil {
		t.Fatalf("reclaimed %v while a launch older than its writer runs", got)
	}
	if e.Pending() != 1 || e.Active() != 1 {
		t.Fatalf("pending %d active %d, want 1 1", e.Pending(), e.Active())
	}
	e.End(later)
	if got := e.Reclaim(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("got %v, want [c]", got)
	}
	e.End(e.Begin(), "d")
	if got := e.Drain(); !slices.Equal(got, []string{"d"}) || e.Pending() != 0 {
		t.Fatalf("Drain = %v", got)
	}
}

// TestNoEarlyReclaim runs launches from many goroutines: each "reads" every
// item that is live when it begins, and checks at its end that none of them
// was reclaimed meanwhile.
func TestNoEarlyReclaim(t *testing.T) {
	var e Epochs[int]
	var mu sync.Mutex
	live := map[int]bool{}  // linked items
	freed := map[int]bool{} // reclaimed items
	next := 0
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 2000 {
				tok := e.Begin()
				mu.Lock()
				var seen []int
				for it := range live {
					seen = append(seen, it)
				}
				var unlinked []int
				if r.IntN(2) == 0 {
					for _, it := range seen {
						if r.IntN(4) == 0 && live[it] {
							delete(live, it)
							unlinked = append(unlinked, it)
						}
					}
					live[next] = true
					next++
				}
				mu.Unlock()
				mu.Lock()
				for _, it := range seen {
					if freed[it] {
						t.Errorf("item %d reclaimed while a launch that saw it runs", it)
					}
				}
				mu.Unlock()
				e.End(tok, unlinked...)
				got := e.Reclaim()
				mu.Lock()
				for _, it := range got {
					freed[it] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rest := e.Reclaim()
	if e.Active() != 0 || e.Pending() != 0 {
		t.Fatalf("after every launch ended: %d active, %d pending (%d reclaimed last)", e.Active(), e.Pending(), len(rest))
	}
}
