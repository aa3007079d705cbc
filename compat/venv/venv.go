// Package venv finds the project's Python environment for tests that
// compare Go with the real CPython and dask: scripts/setup.sh creates .venv
// before go test runs (scripts/test.sh, CI), so its absence is a broken
// setup, never a reason to skip.
package venv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Python is the absolute path of .venv/bin/python; tb fails if it is missing.
func Python(tb testing.TB) string {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	py := filepath.Join(filepath.Dir(file), "..", "..", ".venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		tb.Fatalf("project virtualenv missing (%v): run scripts/setup.sh", err)
	}
	return py
}
