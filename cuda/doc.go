// Package cuda drives NVIDIA GPUs through the CUDA driver API without cgo.
//
// libcuda.so.1 is opened at run time with purego, so programs build with
// CGO_ENABLED=0 and need no CUDA toolkit; only the NVIDIA driver is needed to run
// on a GPU. Kernels are PTX (compiled ahead of time by nvcc and embedded by the
// packages that own them) loaded with [Device.LoadModule]. Loading reads each
// kernel's parameter list from the PTX, and [Function.Launch] refuses
// arguments whose number or widths do not match it (ErrInvalidArgument)
// instead of letting the kernel read garbage parameters.
//
// # No GPU is a normal state
//
// When libcuda cannot be loaded, cuInit reports CUDA_ERROR_NO_DEVICE, or the
// driver sees zero devices, [Devices] and [Open] return an error wrapping
// [ErrNoDevice]. Every other failing driver call returns a *[Error] carrying the
// CUresult code, its name and the operation.
//
// # Concurrency
//
// CUDA contexts are current per OS thread and goroutines migrate between
// threads, so every driver call locks the calling goroutine to its thread,
// makes the device's primary context current there, calls the driver and
// unlocks: a call runs on the caller's own thread and costs what the driver
// costs plus about a hundred nanoseconds, with no hand-off to another thread.
// Calls that wait for the device block their own thread only (the Go runtime
// hands its processor to other goroutines meanwhile): Synchronize on a stream
// or event polls for a few tens of microseconds and then blocks in the
// driver. All types here are therefore safe for concurrent use by any number
// of goroutines, whose calls run in parallel.
// Operations on one [Stream] run in issue order; work on different streams may
// overlap. The nil *Stream is the legacy default stream, and operations given
// it complete before the call returns.
//
// # Lifetimes
//
// [Open] returns a handle on a reference-counted device; when the last handle is
// closed the primary context is released, which frees every buffer, stream,
// event and module made through it. Using a freed or closed object returns an
// error wrapping [ErrClosed]; it never crashes. Modules are cached per device
// and live as long as it does.
//
// # Counting calls
//
// [Device.Calls] counts what a device has been asked for: kernel launches,
// memsets, copies (the synchronous ones apart), host waits and allocations.
// Taken before and after an operation ([Calls.Sub]), it says what the
// operation costs in launches and waits, which on small batches is most
// of its time; benchmarks print it and tests hold operations to a budget.
//
// # Virtual memory
//
// [Device.ReserveRange] reserves device address space with no memory behind
// it, and [VirtualRange.Map] backs parts of it with memory of their own, each
// returned as an ordinary [Buffer] (views, copies, fills, Free). A structure
// that grows part by part keeps one linear address space that way: slaballoc's
// flat pools put super block s at s × 2^24 units of one range, so kernels
// decode a unit's address with one multiply-add. The emulated device
// ([OpenEmulated]) implements the calls with inaccessible host mappings that
// Map opens.
//
// A kernel fault (an illegal address, say) is sticky in CUDA: the context is
// unusable afterwards and every later call on that device returns the same
// error. warpkit's kernels bound every loop and report failure through status
// words instead of faulting.
package cuda
