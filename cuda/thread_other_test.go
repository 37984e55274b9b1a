//go:build !linux

package cuda

// threadID is -1 where the thread's id is not known: the fake driver then
// does not check which context is current.
func threadID() int { return -1 }
