// Command dask-go-zero-worker is a fake dask worker for measuring scheduler
// overhead: it speaks distributed's worker protocol to any dask scheduler
// (Python or Go) and finishes every task the instant it is assigned, so the
// scheduler is the only thing doing work.
//
//	dask-go-zero-worker --scheduler-file sched.json --workers 4 --nthreads 1
//
// Each of the --workers workers listens on its own port (so get_data from the
// scheduler's gather works), registers like a stock `dask worker`
// (distributed/worker.py: Worker._register_with_scheduler), reports
// "running", heartbeats at the interval the scheduler dictates, and answers
// compute-task with task-finished for a small int result. It never runs a
// task, never fetches dependencies, and serves a pickled 0 for every key it
// holds.
//
// With --first-task-file it writes the Unix time at which the first
// compute-task arrived (at any of its workers) to that file: the benchmark's
// "submit to first task running" probe.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"daskgo/protocol"
)

type options struct {
	scheduler, schedulerFile, host, name, versionsFile, firstTaskFile, logLevel string
	workers, nthreads, heartbeatConns, heartbeatFlood                           int
	memoryLimit                                                                 int64
	taskDuration                                                                time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.scheduler, "scheduler", "", "scheduler address, e.g. tcp://127.0.0.1:8786")
	flag.StringVar(&o.schedulerFile, "scheduler-file", "", "read the scheduler address from this JSON file (waits for it)")
	flag.StringVar(&o.host, "host", "127.0.0.1", "interface each worker listens on")
	flag.StringVar(&o.name, "name", "zero", "name prefix; worker i is named <name>-<i>")
	flag.IntVar(&o.workers, "workers", 1, "number of fake workers in this process")
	flag.IntVar(&o.nthreads, "nthreads", 1, "threads each worker announces")
	flag.Int64Var(&o.memoryLimit, "memory-limit", 4<<30, "memory_limit each worker announces, bytes")
	flag.StringVar(&o.versionsFile, "versions", "", "JSON of distributed.versions.get_versions() to announce (avoids version-mismatch warnings)")
	flag.StringVar(&o.firstTaskFile, "first-task-file", "", "write the Unix time of the first compute-task received here")
	flag.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	flag.DurationVar(&o.taskDuration, "task-duration", 0, "if > 0, each of a worker's --nthreads threads runs its tasks one after another, each taking this long, as a stock worker's threads do (0: finish each task on arrival)")
	flag.IntVar(&o.heartbeatConns, "heartbeat-conns", 0, "if > 0, the process's workers heartbeat over this many shared connections instead of one each (10,000 workers on one machine: see heartbeat.go)")
	flag.IntVar(&o.heartbeatFlood, "heartbeat-flood", 0, "if > 0, each worker also sends heartbeats back to back on this many connections of its own (a misbehaving worker, for stress tests)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "dask-go-zero-worker: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	level, err := zerolog.ParseLevel(o.logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := zerolog.New(os.Stderr).Level(level).With().Timestamp().Logger()
	if o.workers < 1 || o.nthreads < 1 {
		return errors.New("--workers and --nthreads must be at least 1")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	addr, err := schedulerAddress(ctx, o)
	if err != nil {
		return err
	}
	versions, err := loadVersions(o.versionsFile)
	if err != nil {
		return err
	}
	probe := &firstTask{path: o.firstTaskFile}
	own := func(ctx context.Context) (heartbeatCaller, error) { return dialOwn(ctx, addr) }
	var shared *sharedConns
	if o.heartbeatConns > 0 {
		shared = newSharedConns(addr, o.heartbeatConns)
		defer shared.closeAll()
	}
	var wg sync.WaitGroup
	errs := make([]error, o.workers)
	for i := range o.workers {
		hb := own
		if shared != nil {
			caller := shared.forWorker(i)
			hb = func(context.Context) (heartbeatCaller, error) { return caller, nil }
		}
		cfg := workerConfig{
			scheduler:   addr,
			host:        o.host,
			name:        fmt.Sprintf("%s-%d", o.name, i),
			nthreads:    o.nthreads,
			memoryLimit: o.memoryLimit,
			versions:    versions,
			firstTask:   probe,
			duration:    o.taskDuration,
			heartbeats:  hb,
			flood:       o.heartbeatFlood,
			log:         log.With().Str("worker", fmt.Sprintf("%s-%d", o.name, i)).Logger(),
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = runWorker(ctx, cfg)
			if errs[i] != nil {
				stop() // one broken worker ends the process: the benchmark would be wrong
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// schedulerAddress is --scheduler, or the "address" of --scheduler-file once
// the file exists (as `dask worker --scheduler-file` waits for it).
func schedulerAddress(ctx context.Context, o options) (string, error) {
	if o.scheduler != "" {
		return o.scheduler, nil
	}
	if o.schedulerFile == "" {
		return "", errors.New("give --scheduler or --scheduler-file")
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := os.ReadFile(o.schedulerFile)
		if err == nil {
			var f struct{ Address string }
			if json.Unmarshal(b, &f) == nil && f.Address != "" {
				return f.Address, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("scheduler file %s: no address after 60s", o.schedulerFile)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// loadVersions reads get_versions() JSON into a value tree; without a file
// it announces only what the scheduler's version check looks at.
func loadVersions(path string) (any, error) {
	if path == "" {
		return protocol.NewMap(
			"host", protocol.NewMap(),
			"packages", protocol.NewMap("dask", "2026.8.0", "distributed", "2026.8.0"),
		), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--versions: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("--versions %s: %w", path, err)
	}
	return fromJSON(v), nil
}

// fromJSON converts encoding/json's tree into protocol values (maps become
// *protocol.Map; whole numbers become ints, as Python's json would give).
func fromJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := &protocol.Map{}
		for k, val := range x {
			m.Set(k, fromJSON(val))
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = fromJSON(it)
		}
		return out
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
		return x
	}
	return v
}

// firstTask records when the first compute-task of the process arrived.
type firstTask struct {
	path string
	once sync.Once
}

func (f *firstTask) mark(log zerolog.Logger) {
	if f.path == "" {
		return
	}
	f.once.Do(func() {
		now := float64(time.Now().UnixNano()) / 1e9
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, fmt.Appendf(nil, "%.6f\n", now), 0o644); err != nil {
			log.Error().Err(err).Msg("write first-task file")
			return
		}
		if err := os.Rename(tmp, f.path); err != nil {
			log.Error().Err(err).Msg("rename first-task file")
		}
	})
}
