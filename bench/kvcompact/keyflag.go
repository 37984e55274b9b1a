package kvcompactbench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/warpkit/warpkit/kv/kvbench"
)

// Bounds of --key's lengths.
const (
	minKeyLen = 8
	maxKeyLen = 1024
)

// keyLen is one of --key's items: keys of min bytes, or of min..max bytes
// each (kvbench.CompactJob's KeyLen and KeyLenMax).
type keyLen struct{ min, max int }

// fixed says every key is min bytes long.
func (k keyLen) fixed() bool { return k.max == k.min }

// String is the item as --key spells it: "16" or "8..64".
func (k keyLen) String() string {
	if k.fixed() {
		return strconv.Itoa(k.min)
	}
	return fmt.Sprintf("%d..%d", k.min, k.max)
}

// cell is the item in a table's key column: its length (a number) where
// fixed, else its range.
func (k keyLen) cell() any {
	if k.fixed() {
		return k.min
	}
	return k.String()
}

// set fills sh's key lengths.
func (k keyLen) set(sh *kvbench.CompactJob) {
	sh.KeyLen = k.min
	if !k.fixed() {
		sh.KeyLenMax = k.max
	}
}

// keyLens is the flag.Value of --key: a comma-separated list of lengths
// (N) and ranges (MIN..MAX), each within minKeyLen..maxKeyLen.
type keyLens []keyLen

func (v *keyLens) String() string {
	if v == nil {
		return ""
	}
	return v.join(",")
}

// join is the items as --key spells them, separated by sep.
func (v keyLens) join(sep string) string {
	parts := make([]string, len(v))
	for i, k := range v {
		parts[i] = k.String()
	}
	return strings.Join(parts, sep)
}

func (v *keyLens) Set(s string) error {
	var out keyLens
	for _, f := range strings.Split(s, ",") {
		k, err := parseKeyLen(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		out = append(out, k)
	}
	*v = out
	return nil
}

func parseKeyLen(s string) (keyLen, error) {
	lo, hi, ok := kvbench.ParseRange(s)
	if !ok || lo < minKeyLen || hi > maxKeyLen {
		return keyLen{}, fmt.Errorf("%q: want key lengths N or ranges MIN..MAX, each in %d..%d (MIN ≤ MAX), separated by commas", s, minKeyLen, maxKeyLen)
	}
	return keyLen{lo, hi}, nil
}
