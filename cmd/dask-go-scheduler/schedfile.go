package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"daskgo/scheduler/server"
)

// writeSchedulerFile writes Scheduler.identity() as JSON, as `dask scheduler
// --scheduler-file` does, atomically, so a worker polling for the file never
// reads half of it.
func writeSchedulerFile(ctx context.Context, path string, srv *server.Server) error {
	id, err := srv.IdentityJSON(ctx)
	if err != nil {
		return fmt.Errorf("scheduler file %s: %w", path, err)
	}
	data, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return fmt.Errorf("scheduler file %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".scheduler-file-*")
	if err != nil {
		return fmt.Errorf("scheduler file %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil && cerr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("scheduler file %s: %w", path, errors.Join(werr, cerr))
	}
	return nil
}
