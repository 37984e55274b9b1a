package benchfmt

import (
	"fmt"
	"time"
)

// HMean is the harmonic mean of xs (the mean of rates over equal amounts of
// work); 0 when xs is empty or holds a rate that is not positive.
func HMean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		if x <= 0 {
			return 0
		}
		s += 1 / x
	}
	if len(xs) == 0 {
		return 0
	}
	return float64(len(xs)) / s
}

// Ratio is the cell a/b as "1.23x", or "-" when b is not positive.
func Ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// YesNo is the cell of a target check: "yes", or "NO" to stand out.
func YesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// Millis is d in milliseconds, to the microsecond.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
