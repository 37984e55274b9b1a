package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestKVBenchQuick(t *testing.T) {
	if err := runKVBenchCommand([]string{"--num", "3000", "--fs", "mem", "--progress", "off", "--value", "32..512"}); err != nil {
		t.Fatal(err)
	}
	if err := runKVBenchCommand([]string{"--num", "2000", "--workloads", "fillrandom,readrandom", "--json", "--progress", "off", "--dir", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
}

func TestKVTools(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	for _, args := range [][]string{
		{"set", dir, "a", "1"},
		{"set", dir, "b", "2"},
		{"get", dir, "a"},
		{"delete", dir, "b"},
		{"scan", dir},
		{"compact", dir},
		{"check", dir},
		{"stats", dir},
	} {
		if err := runKV(args); err != nil {
			t.Fatalf("warp kv %v: %v", args, err)
		}
	}
	if err := runKV([]string{"get", dir, "b"}); err == nil {
		t.Fatal("deleted key found")
	}
	if err := runKV([]string{"get", filepath.Join(t.TempDir(), "none"), "a"}); err == nil {
		t.Fatal("get on a missing store succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{nil, {"frobnicate"}, {"get", dir}, {"bench", "--workloads", "nope"}, {"bench", "--value", "0"}} {
		if err := runKV(bad); !errors.Is(err, errUsage) {
			t.Errorf("warp kv %v: %v (want a usage error)", bad, err)
		}
	}
}
