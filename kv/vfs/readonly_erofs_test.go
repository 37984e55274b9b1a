//go:build !plan9

package vfs

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

func TestReadOnlyErrorIsEROFS(t *testing.T) {
	_, err := NewReadOnly(NewMem()).Create("/f")
	var pe *os.PathError
	if !errors.Is(err, syscall.EROFS) || !errors.As(err, &pe) || pe.Err != syscall.EROFS {
		t.Fatalf("Create: %#v, want an *os.PathError whose Err is syscall.EROFS", err)
	}
}
