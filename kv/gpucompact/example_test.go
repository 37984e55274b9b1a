package gpucompact_test

import (
	"context"
	"fmt"
	"log"

	"github.com/warpkit/warpkit/kv"
	"github.com/warpkit/warpkit/kv/gpucompact"
	"github.com/warpkit/warpkit/kv/vfs"
)

// A store whose compactions run through the pipeline (every job, here; by
// default jobs of 1 MiB and more on the CUDA engine, 8 MiB on the Go
// engine).
func Example() {
	gc, err := gpucompact.New(gpucompact.Options{MinInputBytes: -1})
	if err != nil {
		log.Fatal(err)
	}
	db, err := kv.Open("/db", &kv.Options{FS: vfs.NewMem(), Compactor: gc})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 1000 {
		db.Set(fmt.Appendf(nil, "key%04d", i), []byte("value"), nil)
	}
	if err := db.Compact(context.Background(), nil, nil); err != nil {
		log.Fatal(err)
	}
	v, _ := db.Get([]byte("key0042"))
	fmt.Printf("%s, engine jobs: %d\n", v, gc.Stats().EngineJobs)
	db.Close()
	gc.Close()
	// Output: value, engine jobs: 1
}
