package main

import (
	"math"
	"testing"
	"time"

	"github.com/warpkit/warpkit/kv/kvbench"
)

// TestRatioLabels: every ratio column is named base/other and holds the
// base store's ops/s over the other's, whatever order the stores ran in
// (with --stores pebble,warpkit the column said warpkit/warpkit and held
// pebble's ops/s over warpkit's).
func TestRatioLabels(t *testing.T) {
	ops := map[string]int64{"warpkit": 300, "pebble": 200, "goleveldb": 100}
	res := map[string]map[string]*kvbench.Result{}
	for name, n := range ops {
		res[name] = map[string]*kvbench.Result{"fillrandom": {Ops: n, Elapsed: time.Second, Latency: kvbench.NewHistogram()}}
	}
	for _, tc := range []struct {
		stores []string
		want   map[string]float64 // ratio column -> value
	}{
		{[]string{"warpkit", "pebble", "goleveldb"}, map[string]float64{"warpkit/pebble ops/s": 1.5, "warpkit/goleveldb ops/s": 3}},
		{[]string{"pebble", "warpkit"}, map[string]float64{"warpkit/pebble ops/s": 1.5}},
		{[]string{"goleveldb", "pebble"}, map[string]float64{"goleveldb/pebble ops/s": 0.5}},
		{[]string{"pebble"}, map[string]float64{}},
	} {
		var stores []opener
		for _, n := range tc.stores {
			stores = append(stores, opener{name: n})
		}
		rep := report(stores, []string{"fillrandom"}, res, kvbench.Config{}, settings{})
		tab := rep.Tables[0]
		got := map[string]float64{}
		for i, c := range tab.Columns {
			if i > len(stores) { // workload, then one ops/s column per store
				got[c] = tab.Rows[0][i].(float64)
			}
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%v: ratio columns %v, want %v", tc.stores, got, tc.want)
		}
		for c, v := range tc.want {
			if g, ok := got[c]; !ok || math.Abs(g-v) > 1e-9 {
				t.Fatalf("%v: ratio columns %v, want %v", tc.stores, got, tc.want)
			}
		}
	}
}
