package benchfmt

// Mix32 is MurmurHash3's 32-bit finalizer, a bijection on uint32: the
// benches draw distinct, uniformly spread keys as Mix32 of an index.
func Mix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
