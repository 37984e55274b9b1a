package gpurt

import "github.com/warpkit/warpkit/cuda"

// Kernel is a function with its launch shape: the block size, how many items
// (operations, nodes, elements) one warp takes at a time and, for a driver
// that takes its work grid-stride, the largest grid worth launching: as many
// blocks as fit on the device at once (a larger grid would only queue
// blocks). MaxBlocks 0: one warp per PerWarp items, however many blocks that
// takes.
type Kernel struct {
	F         *cuda.Function
	Block     int
	PerWarp   int
	MaxBlocks int
}

// Launch runs k on enough blocks for items items.
func (k Kernel) Launch(stream *cuda.Stream, items int, args ...any) error {
	warps := (items + k.PerWarp - 1) / k.PerWarp
	blocks := max(1, (warps*32+k.Block-1)/k.Block)
	if k.MaxBlocks > 0 {
		blocks = min(blocks, k.MaxBlocks)
	}
	return k.F.Launch(cuda.D1(blocks), cuda.D1(k.Block), 0, stream, args...)
}

// KernelSpec names one kernel of a module for LoadKernels.
type KernelSpec struct {
	Dst     *Kernel
	Name    string
	PerWarp int
	Stride  bool // the driver takes its work grid-stride: cap the grid at the resident blocks
	Block   int  // threads per block, when not LoadKernels's block
}

// LoadKernels fills each spec's Kernel from mod, with blocks of block threads
// (or of the spec's own Block).
func LoadKernels(mod *cuda.Module, dev *cuda.Device, block int, specs []KernelSpec) error {
	sms := dev.Properties().Multiprocessors
	for _, s := range specs {
		f, err := mod.Function(s.Name)
		if err != nil {
			return err
		}
		b := block
		if s.Block > 0 {
			b = s.Block
		}
		*s.Dst = Kernel{F: f, Block: b, PerWarp: s.PerWarp}
		if !s.Stride {
			continue
		}
		per, err := f.MaxActiveBlocksPerSM(b, 0)
		if err != nil {
			return err
		}
		s.Dst.MaxBlocks = max(1, per*max(sms, 1))
	}
	return nil
}
