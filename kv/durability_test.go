package kv

import (
	"testing"

	"github.com/warpkit/warpkit/kv/vfs"
)

func TestParentDir(t *testing.T) {
	fs := vfs.NewMem()
	for dir, want := range map[string]string{
		"mydb":       ".",
		"./mydb":     ".",
		"a/b":        "a",
		"/a":         "/",
		"/a/b/":      "/a",
		".":          "..",
		"..":         "../..",
		"/":          "",
		"a/../mydb":  ".",
		"/a/../mydb": "/",
	} {
		if got := parentDir(fs, dir); got != want {
			t.Errorf("parentDir(%q) = %q, want %q", dir, got, want)
		}
	}
}

// TestNewStoreDirSurvivesCrash: Open creates the store directory (and any
// missing parents); after a synced write and a crash, the store must still
// be there. A relative single-element dir ("mydb") once skipped the sync of
// its parent (the current directory), and missing ancestors were never
// synced, so the crash lost the whole store.
func TestNewStoreDirSurvivesCrash(t *testing.T) {
	for _, dir := range []string{"mydb", "/mydb", "/top/mydb", "rel/deeper/mydb", "/exists/mydb"} {
		t.Run(dir, func(t *testing.T) {
			fs := vfs.NewMem()
			if err := fs.MkdirAll("/exists", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := vfs.SyncDir(fs, "/"); err != nil {
				t.Fatal(err)
			}
			db, err := Open(dir, &Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Set([]byte("k"), []byte("v"), Sync); err != nil {
				t.Fatal(err)
			}
			crashed := fs.CrashClone(vfs.CrashOptions{})
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = Open(dir, &Options{FS: crashed, ErrorIfNotExists: true})
			if err != nil {
				t.Fatalf("reopen after a crash: %v\n%s", err, crashed)
			}
			defer db.Close()
			mustGet(t, db, "k", "v")
		})
	}
}
