package slaballoc_test

import (
	"context"
	"fmt"

	"github.com/warpkit/warpkit"
	"github.com/warpkit/warpkit/slaballoc"
)

// A pool of fixed-size units: allocate, write, read, free. Freed units are
// reused.
func ExamplePool() {
	ctx := context.Background()
	p, err := slaballoc.New(slaballoc.Options{Backend: warpkit.CPU, UnitBytes: 64})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	units := make([]uint32, 3)
	if err := p.Allocate(ctx, units); err != nil {
		panic(err)
	}
	if err := p.WriteUnit(ctx, units[1], []byte("hello")); err != nil {
		panic(err)
	}
	buf := make([]byte, 5)
	if err := p.ReadUnit(ctx, units[1], buf); err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", buf)
	if err := p.Free(ctx, units); err != nil {
		panic(err)
	}
	st, err := p.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("allocated after free:", st.Allocated)
	// Output:
	// hello
	// allocated after free: 0
}
