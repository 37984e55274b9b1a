package slabhash

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/warpkit/warpkit"
)

// TestRunChunks checks how a host batch of several staging chunks goes on
// after a chunk fails: past pool exhaustion every chunk still runs (the
// package promises that every element needing no new slab is applied);
// after any other error the chunks not run are marked Failed, with count 0.
func TestRunChunks(t *testing.T) {
	exhausted := fmt.Errorf("chunk: %w", warpkit.ErrPoolExhausted)
	cases := []struct {
		name    string
		errs    map[int]error // chunk start -> its error
		ran     []int         // chunk starts that ran
		failed  int           // elements from here on are marked Failed by runChunks
		wantErr []error
	}{
		{"all succeed", nil, []int{0, 3, 6, 9}, 10, nil},
		{"exhaustion goes on", map[int]error{3: exhausted, 6: exhausted}, []int{0, 3, 6, 9}, 10, []error{warpkit.ErrPoolExhausted}},
		{"other error stops", map[int]error{3: context.Canceled}, []int{0, 3}, 6, []error{context.Canceled}},
		{"exhaustion, then a stop", map[int]error{0: exhausted, 6: context.Canceled}, []int{0, 3, 6}, 9,
			[]error{warpkit.ErrPoolExhausted, context.Canceled}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := make([]Result, 10)
			counts := make([]uint32, 10)
			for i := range res {
				res[i], counts[i] = Found, 7
			}
			var ran []int
			delta, err := runChunks(10, 3, res, counts, func(lo, hi int) (int64, error) {
				ran = append(ran, lo)
				return int64(hi - lo), c.errs[lo]
			})
			if !slices.Equal(ran, c.ran) {
				t.Fatalf("ran chunks %v, want %v", ran, c.ran)
			}
			if want := int64(min(10, c.ran[len(c.ran)-1]+3)); delta != want {
				t.Fatalf("delta %d, want %d", delta, want)
			}
			if c.wantErr == nil && err != nil {
				t.Fatalf("error %v", err)
			}
			for _, w := range c.wantErr {
				if !errors.Is(err, w) {
					t.Fatalf("error %v is not %v", err, w)
				}
			}
			for i := range res {
				wantRes, wantCount := Found, uint32(7) // left to run for the chunks that ran
				if i >= c.failed {
					wantRes, wantCount = Failed, 0
				}
				if res[i] != wantRes || counts[i] != wantCount {
					t.Fatalf("element %d: %v count %d, want %v count %d", i, res[i], counts[i], wantRes, wantCount)
				}
			}
		})
	}
	// Results and counts are optional.
	if _, err := runChunks(5, 2, nil, nil, func(lo, hi int) (int64, error) { return 0, context.Canceled }); !errors.Is(err, context.Canceled) {
		t.Fatalf("without outputs: %v", err)
	}
}
