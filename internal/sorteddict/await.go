package sorteddict

import (
	"time"

	"github.com/warpkit/warpkit/cuda"
)

// awaitPoll is how long Await polls before it blocks.
const awaitPoll = time.Millisecond

// Await waits until the work queued on stream has finished and returns the
// first asynchronous error, as stream.Synchronize does. For up to awaitPoll it
// polls the stream (cuStreamQuery through the device's executor, a
// microsecond or two per poll) instead: a blocking synchronization parks the
// calling goroutine once it has waited a few tens of microseconds, and waking
// it costs about as much again, which is the whole duration of a small batch
// operation. Longer waits block after the polling window, so a long operation
// keeps a CPU busy for at most awaitPoll.
func Await(stream *cuda.Stream) error {
	deadline := time.Now().Add(awaitPoll)
	for {
		done, err := stream.Done()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return stream.Synchronize()
		}
	}
}
