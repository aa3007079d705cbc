package compat

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

// uploadsPy makes files uploaded to the scheduler (Client.upload_file)
// importable in every Python process of ours: the host imports an upload
// as distributed's Scheduler does, and each helper catches up before it
// unpickles a graph. Both read the directory from LocalDirectoryEnv.
//
//go:embed uploads.py
var uploadsPy string

// MakeLocalDirectory makes the scheduler's local directory, where
// distributed's Server makes its own (core.Server.__init__: a
// "scheduler-" work directory under dask-scratch-space in the temporary
// directory). Uploaded files go there; the caller removes it at shutdown.
func MakeLocalDirectory() (string, error) {
	base := filepath.Join(os.TempDir(), "dask-scratch-space")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("make the scheduler's local directory: %w", err)
	}
	dir, err := os.MkdirTemp(base, "scheduler-")
	if err != nil {
		return "", fmt.Errorf("make the scheduler's local directory: %w", err)
	}
	return dir, nil
}

// LocalDirectoryEnv is the environment entry that names the local
// directory to the host and the helpers (uploads.py).
func LocalDirectoryEnv(dir string) string { return "DASKGO_LOCAL_DIRECTORY=" + dir }
