package gpurt

import (
	"errors"
	"strings"
	"testing"

	"github.com/warpkit/warpkit/internal/errs"
)

func TestStatusError(t *testing.T) {
	cases := []struct {
		status uint32
		want   error
	}{
		{StatusReservedKey | StatusRetryLimit, errs.ErrReservedKey},
		{StatusBadOp, errs.ErrInvalidArgument},
		{StatusBadFree, errs.ErrInvalidArgument},
		{StatusBadRoom, errs.ErrInvalidArgument},
		{StatusInvalidArgument, errs.ErrInvalidArgument},
		{StatusPoolExhausted | StatusRetryLimit, errs.ErrPoolExhausted},
		{StatusRetryLimit, errs.ErrRetryLimit},
		{StatusOverflow, errs.ErrInvalidArgument},
	}
	for _, c := range cases {
		if err := StatusError("k", c.status); !errors.Is(err, c.want) {
			t.Errorf("status %#x: %v, want %v", c.status, err, c.want)
		}
	}
	if StatusError("k", 0) != nil {
		t.Fatal("status 0 is an error")
	}
	if err := StatusError("k", 1<<30); err == nil || !strings.Contains(err.Error(), "unexpected") {
		t.Fatalf("unknown flag: %v", err)
	}
	// Every flag of the registry has a distinct bit.
	flags := []uint32{StatusRetryLimit, StatusPoolExhausted, StatusOverflow, StatusBadFree, StatusReservedKey, StatusBadOp, StatusBadRoom, StatusInvalidArgument}
	seen := uint32(0)
	for _, f := range flags {
		if f&(f-1) != 0 || seen&f != 0 {
			t.Fatalf("flag %#x is not a fresh single bit", f)
		}
		seen |= f
	}
}
