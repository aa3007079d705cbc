package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"daskgo/cmd/dask-go-sim/internal/sim"
)

// The seven seed workloads of the design discussion.
const seedWorkloads = "anom-mean,basic-sum,climactic-mean,dataframe-align,jobqueue,shuffle,vorticity"

// cmdSweep runs every (workload, n_workers, mode) that has no record yet in
// RESULTS/runs/. Each run writes its own file (atomically, via rename) and
// holds a lock file while it runs, so a sweep can be interrupted and
// resumed, and several sweeps (different -workers or -workloads subsets,
// or the same list) can run at once without repeating work.
func cmdSweep(args []string) error {
	fs := flag.NewFlagSet("sweep", flag.ExitOnError)
	var cf clusterFlags
	cf.register(fs)
	graphs := fs.String("graphs", "scripts/sim/graphs", "directory of exported graphs")
	results := fs.String("results", "scripts/sim/results", "results directory")
	scale := fs.String("scale", "full", "graph scale: small | full (file WORKLOAD-SCALE.jsonl.gz)")
	workloads := fs.String("workloads", seedWorkloads, "comma-separated workloads, or synthetic specs (tree:N)")
	workers := fs.String("workers", "5,20,100,500,1000", "comma-separated cluster sizes")
	modes := fs.String("modes", "off,main,withholding,coassign", "comma-separated modes")
	budget := fs.Duration("budget", 0, "stop starting new runs after this long (0: no limit)")
	_ = fs.Parse(args)
	if err := cf.resolve(fs); err != nil {
		return err
	}
	sizes, err := parseInts(*workers)
	if err != nil {
		return err
	}
	runs := filepath.Join(*results, "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return fmt.Errorf("results dir: %w", err)
	}
	t0 := time.Now()
	for _, wl := range splitList(*workloads) {
		var g *sim.Graph // loaded on first need
		for _, n := range sizes {
			for _, mode := range splitList(*modes) {
				if *budget > 0 && time.Since(t0) > *budget {
					fmt.Fprintf(os.Stderr, "budget of %s used; stopping (re-run to resume)\n", *budget)
					return nil
				}
				name := fmt.Sprintf("%s-%s-w%d-%s", sanitize(wl), *scale, n, mode)
				if g == nil && !exists(filepath.Join(runs, name+".json")) {
					if g, err = sweepGraph(*graphs, wl, *scale); err != nil {
						return err
					}
				}
				if err := sweepOne(runs, name, g, &cf, n, mode); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func sweepGraph(dir, wl, scale string) (*sim.Graph, error) {
	if _, err := sim.Synthetic(wl); err == nil {
		return sim.Synthetic(wl)
	}
	return sim.LoadGraph(filepath.Join(dir, wl+"-"+scale+".jsonl.gz"))
}

// sweepOne runs one configuration unless its record exists or another
// sweep holds its lock.
func sweepOne(dir, name string, g *sim.Graph, cf *clusterFlags, n int, mode string) error {
	out := filepath.Join(dir, name+".json")
	if exists(out) {
		return nil
	}
	lock := filepath.Join(dir, name+".lock")
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		fmt.Fprintf(os.Stderr, "%s: locked by another sweep (remove %s if none runs)\n", name, lock)
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", name, err)
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	f.Close()
	defer os.Remove(lock)
	cfg, err := cf.config(n, mode)
	if err != nil {
		return err
	}
	res, err := sim.Run(g, cfg)
	if err != nil {
		// a stuck or failed run is a finding: record it, keep sweeping
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return writeJSON(out, map[string]any{"workload": g.Workload, "scale": g.Scale, "n_workers": n,
			"mode": mode, "n_tasks": len(g.Tasks), "error": err.Error()})
	}
	fmt.Fprintf(os.Stderr, "%-40s makespan %9.1f s  peak %8.2f GiB  transfers %8.2f GiB  engine %6.2f s (%.1f µs/task)  sim %5.1f s\n",
		name, res.MakespanS, gib(res.PeakClusterMemoryBytes), gib(res.TransferredBytes), res.EngineCPUS,
		res.EngineCPUUsPerTask, res.SimWallS)
	return writeJSON(out, res)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ':' || c == '/' {
			b[i] = '_'
		}
	}
	return string(b)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q in %q", p, s)
		}
		out = append(out, n)
	}
	return out, nil
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }
