// Package conformance tests a structure against the structure contract
// (docs/CONTRACT.md): what a closed structure answers, the second Close,
// empty batches, slices of different lengths, a cancelled context, Len and
// Stats, half-open ranges, and device-resident methods on the CPU backend.
// Every structure's conformance test (conformance_test.go) runs it on the
// CPU backend in CI and on the CUDA backend where a device is present.
//
// A Subject describes a structure through a few adapters over uint32 keys
// and values; the closed-state and device checks need no adapter: they call
// every exported method by reflection.
package conformance

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/warpkit/warpkit"
)

// Structure is what every structure has (the contract's common methods).
type Structure interface {
	Backend() warpkit.Backend
	Close() error
}

// Subject adapts one structure type to the suite. Count and Range are nil
// for structures without range queries.
type Subject struct {
	Name string
	// New returns an empty structure on the given backend (t is for Cleanup
	// and Skip; the suite closes what it opens).
	New    func(t *testing.T, b warpkit.Backend) Structure
	Insert func(ctx context.Context, s Structure, keys, vals []uint32) error
	// Lookup returns each key's value and presence.
	Lookup func(ctx context.Context, s Structure, keys []uint32) ([]uint32, []bool, error)
	Delete func(ctx context.Context, s Structure, keys []uint32) error
	// Mismatch calls a batch method with slices of different lengths.
	Mismatch func(ctx context.Context, s Structure) error
	Count    func(ctx context.Context, s Structure, lo, hi []uint32) ([]uint32, error)
	Range    func(ctx context.Context, s Structure, lo, hi []uint32) (*warpkit.Ranges[uint32, uint32], error)
}

// Run runs every check of the suite on backend b.
func Run(t *testing.T, sub Subject, b warpkit.Backend) {
	t.Run("closed", func(t *testing.T) { closedState(t, sub, b) })
	t.Run("empty-batches", func(t *testing.T) { emptyBatches(t, sub, b) })
	t.Run("lengths", func(t *testing.T) { lengths(t, sub, b) })
	t.Run("context", func(t *testing.T) { cancelled(t, sub, b) })
	t.Run("len-stats", func(t *testing.T) { lenStats(t, sub, b) })
	if sub.Count != nil && sub.Range != nil {
		t.Run("half-open", func(t *testing.T) { halfOpen(t, sub, b) })
	}
	if b == warpkit.CPU {
		t.Run("device-on-cpu", func(t *testing.T) { deviceOnCPU(t, sub) })
	}
}

func open(t *testing.T, sub Subject, b warpkit.Backend) Structure {
	t.Helper()
	s := sub.New(t, b)
	if s.Backend() != b {
		t.Fatalf("%s: backend %v, asked for %v", sub.Name, s.Backend(), b)
	}
	return s
}

// callAll calls every exported method of s except those in skip, with zero
// arguments (context.Background() for a context), and passes each method's
// error result (the last result, when it is an error) to check.
func callAll(t *testing.T, s Structure, skip func(name string) bool, check func(name string, err error)) {
	t.Helper()
	v := reflect.ValueOf(s)
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	for i := range v.NumMethod() {
		m, name := v.Method(i), v.Type().Method(i).Name
		if skip(name) {
			continue
		}
		mt := m.Type()
		if mt.NumOut() == 0 || mt.Out(mt.NumOut()-1) != errType {
			continue // not a method that can fail
		}
		args := make([]reflect.Value, mt.NumIn())
		for j := range args {
			if mt.In(j) == ctxType {
				args[j] = reflect.ValueOf(context.Background())
			} else {
				args[j] = reflect.Zero(mt.In(j))
			}
		}
		var out []reflect.Value
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s panicked: %v", name, r)
				}
			}()
			out = m.Call(args)
		}()
		if out == nil {
			continue
		}
		err, _ := out[len(out)-1].Interface().(error)
		check(name, err)
	}
}

// closedState: after Close, every method that can fail returns ErrClosed,
// Close included; Backend still answers.
func closedState(t *testing.T, sub Subject, b warpkit.Backend) {
	s := open(t, sub, b)
	ctx := context.Background()
	if err := sub.Insert(ctx, s, []uint32{1, 2}, []uint32{10, 20}); err != nil {
		t.Fatal(err)
	}
	CheckClosed(t, s)
}

// CheckClosed closes s and checks that every method of s that can fail then
// returns ErrClosed (a second Close included) and that Backend still
// answers: the contract's "Closing", for structures the Subject does not fit.
func CheckClosed(t *testing.T, s Structure) {
	t.Helper()
	b := s.Backend()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if s.Backend() != b {
		t.Fatalf("Backend after Close: %v", s.Backend())
	}
	n := 0
	callAll(t, s, func(string) bool { return false }, func(name string, err error) {
		n++
		if !errors.Is(err, warpkit.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	})
	if n < 5 {
		t.Fatalf("only %d methods checked", n)
	}
}

func emptyBatches(t *testing.T, sub Subject, b warpkit.Backend) {
	s := open(t, sub, b)
	defer s.Close()
	ctx := context.Background()
	if err := sub.Insert(ctx, s, nil, nil); err != nil {
		t.Fatalf("empty insert: %v", err)
	}
	if err := sub.Insert(ctx, s, []uint32{}, []uint32{}); err != nil {
		t.Fatalf("empty insert: %v", err)
	}
	if _, _, err := sub.Lookup(ctx, s, nil); err != nil {
		t.Fatalf("empty lookup: %v", err)
	}
	if err := sub.Delete(ctx, s, nil); err != nil {
		t.Fatalf("empty delete: %v", err)
	}
	if sub.Count != nil {
		if _, err := sub.Count(ctx, s, nil, nil); err != nil {
			t.Fatalf("empty count: %v", err)
		}
		r, err := sub.Range(ctx, s, nil, nil)
		if err != nil || r.Len() != 0 {
			t.Fatalf("empty range: %v, %d queries", err, r.Len())
		}
	}
	mustLen(t, s, 0)
}

func lengths(t *testing.T, sub Subject, b warpkit.Backend) {
	s := open(t, sub, b)
	defer s.Close()
	ctx := context.Background()
	if err := sub.Mismatch(ctx, s); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("slices of different lengths: %v, want ErrInvalidArgument", err)
	}
	mustLen(t, s, 0)
	if err := sub.Insert(ctx, s, []uint32{1, 2, 3}, []uint32{1}); !errors.Is(err, warpkit.ErrInvalidArgument) {
		t.Fatalf("insert of 3 keys and 1 value: %v", err)
	}
	mustLen(t, s, 0)
}

func cancelled(t *testing.T, sub Subject, b warpkit.Backend) {
	s := open(t, sub, b)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sub.Insert(ctx, s, []uint32{1, 2, 3}, []uint32{1, 2, 3}); !errors.Is(err, context.Canceled) {
		t.Fatalf("insert with a cancelled context: %v", err)
	}
	mustLen(t, s, 0)
	if _, _, err := sub.Lookup(ctx, s, []uint32{1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("lookup with a cancelled context: %v", err)
	}
}

func lenStats(t *testing.T, sub Subject, b warpkit.Backend) {
	s := open(t, sub, b)
	defer s.Close()
	ctx := context.Background()
	keys := make([]uint32, 1000)
	for i := range keys {
		keys[i] = uint32(i*7 + 1)
	}
	if err := sub.Insert(ctx, s, keys, keys); err != nil {
		t.Fatal(err)
	}
	if err := sub.Delete(ctx, s, keys[:100]); err != nil {
		t.Fatal(err)
	}
	mustLen(t, s, 900)
	vals, found, err := sub.Lookup(ctx, s, keys[90:110])
	if err != nil {
		t.Fatal(err)
	}
	for i := range found {
		if want := i >= 10; found[i] != want || (want && vals[i] != keys[90+i]) {
			t.Fatalf("lookup(%d) = %d, %v", keys[90+i], vals[i], found[i])
		}
	}
	st := call(t, s, "Stats", ctx)
	if len(st) != 2 || st[1] != nil {
		t.Fatalf("Stats: %v", st)
	}
	sv := reflect.ValueOf(st[0])
	if sv.Kind() != reflect.Struct || sv.NumField() == 0 || sv.Type().Field(0).Name != "Backend" {
		t.Fatalf("Stats is %T: want a struct whose first field is Backend", st[0])
	}
	if got := sv.Field(0).Interface(); got != b {
		t.Fatalf("Stats.Backend = %v, want %v", got, b)
	}
}

// halfOpen: ranges are [lo, hi); lo >= hi is empty; the largest key is in
// no range.
func halfOpen(t *testing.T, sub Subject, b warpkit.Backend) {
	s := open(t, sub, b)
	defer s.Close()
	ctx := context.Background()
	const mx = ^uint32(0)
	if err := sub.Insert(ctx, s, []uint32{0, 10, 20, 30, mx - 1, mx}, []uint32{1, 2, 3, 4, 5, 6}); err != nil {
		if errors.Is(err, warpkit.ErrReservedKey) {
			t.Skip("the structure reserves the largest keys")
		}
		t.Fatal(err)
	}
	lo := []uint32{10, 10, 11, 30, 20, 0, 0, 0, mx - 1}
	hi := []uint32{30, 31, 20, 10, 20, 1, 0, mx, mx}
	want := [][]uint32{{10, 20}, {10, 20, 30}, {}, {}, {}, {0}, {}, {0, 10, 20, 30, mx - 1}, {mx - 1}}
	counts, err := sub.Count(ctx, s, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sub.Range(ctx, s, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != len(lo) {
		t.Fatalf("range answered %d queries of %d", r.Len(), len(lo))
	}
	for i := range lo {
		var got []uint32
		for k := range r.Query(i) {
			got = append(got, k)
		}
		if int(counts[i]) != len(want[i]) || !slices.Equal(got, want[i]) {
			t.Errorf("[%d, %d): count %d, range %v; want %v", lo[i], hi[i], counts[i], got, want[i])
		}
	}
}

// deviceOnCPU: every ...Device method of a CPU-backend structure returns
// ErrNeedsCUDA.
func deviceOnCPU(t *testing.T, sub Subject) {
	s := open(t, sub, warpkit.CPU)
	defer s.Close()
	CheckDeviceOnCPU(t, s)
}

// CheckDeviceOnCPU checks that every method of s (a structure on the CPU
// backend) whose name ends in Device returns ErrNeedsCUDA.
func CheckDeviceOnCPU(t *testing.T, s Structure) {
	t.Helper()
	n := 0
	callAll(t, s, func(name string) bool { return !strings.HasSuffix(name, "Device") }, func(name string, err error) {
		n++
		if !errors.Is(err, warpkit.ErrNeedsCUDA) {
			t.Errorf("%s on the CPU backend: %v, want ErrNeedsCUDA", name, err)
		}
	})
	if n == 0 {
		t.Fatal("no Device methods found")
	}
}

func mustLen(t *testing.T, s Structure, want int) {
	t.Helper()
	out := call(t, s, "Len", context.Background())
	if len(out) != 2 {
		t.Fatalf("Len returns %d values, want (int, error)", len(out))
	}
	if out[1] != nil {
		t.Fatalf("Len: %v", out[1])
	}
	if n, ok := out[0].(int); !ok || n != want {
		t.Fatalf("Len = %v, want %d", out[0], want)
	}
}

// call calls method name of s by reflection and returns its results.
func call(t *testing.T, s Structure, name string, args ...any) []any {
	t.Helper()
	m := reflect.ValueOf(s).MethodByName(name)
	if !m.IsValid() {
		t.Fatalf("%T has no method %s", s, name)
	}
	in := make([]reflect.Value, len(args))
	for i, a := range args {
		in[i] = reflect.ValueOf(a)
	}
	var out []any
	for _, v := range m.Call(in) {
		out = append(out, v.Interface())
	}
	if len(out) > 0 {
		if e, ok := out[len(out)-1].(error); ok || out[len(out)-1] == nil {
			out[len(out)-1] = e
		}
	}
	return out
}
