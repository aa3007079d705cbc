// Command dask-go-scheduler is a drop-in replacement for `dask scheduler`:
// stock dask Clients and `dask worker`s connect to it unchanged.
//
//	dask-go-scheduler --port 8786 --scheduler-file sched.json --config dask.yaml
//
// Configuration is dask's: YAML files in ~/.config/dask, /etc/dask,
// $DASK_CONFIG and --config, overridden by DASK_* environment variables.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"daskgo/compat"
	"daskgo/scheduler"
	"daskgo/scheduler/server"
)

type options struct {
	host, dashboardAddr, schedulerFile, configFile, python, logLevel, cpuProfile, heapProfile string
	port                                                                                      int
}

func main() {
	runtimeDefaults()
	var o options
	flag.StringVar(&o.host, "host", "", "URI, IP or hostname to listen on; empty means all interfaces")
	flag.IntVar(&o.port, "port", 8786, "port to listen on; 0 picks a free port")
	flag.StringVar(&o.dashboardAddr, "dashboard-address", ":8787", "dashboard address advertised in identity (not served yet)")
	flag.StringVar(&o.schedulerFile, "scheduler-file", "", "write the scheduler's identity as JSON to this file (for `dask worker --scheduler-file` and `Client(scheduler_file=...)`)")
	flag.StringVar(&o.configFile, "config", "", "a dask config YAML file, above ~/.config/dask, /etc/dask and $DASK_CONFIG (DASK_* env vars still win)")
	flag.StringVar(&o.python, "python", "python3", "Python interpreter of the clients' environment, for the graph materializer")
	flag.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	flag.StringVar(&o.cpuProfile, "cpu-profile", "", "write a Go CPU profile (pprof) of the whole run to this file, for `go tool pprof`")
	flag.StringVar(&o.heapProfile, "heap-profile", "", "write a Go heap profile (pprof) to this file on SIGUSR1 (FILE.N for the N-th) and at exit")
	listOps := flag.Bool("list-ops", false, "print the op table (every distributed scheduler op and what it gets here) as JSON and exit")
	flag.Parse()
	if *listOps {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(server.Ops); err != nil {
			fmt.Fprintf(os.Stderr, "dask-go-scheduler: --list-ops: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "dask-go-scheduler: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	level, err := zerolog.ParseLevel(o.logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := zerolog.New(os.Stderr).Level(level).With().Timestamp().Logger()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if o.heapProfile != "" {
		stop := heapProfiles(o.heapProfile, log)
		defer stop()
	}
	dashboard, err := portOf(o.dashboardAddr)
	if err != nil {
		return fmt.Errorf("--dashboard-address %q: %w", o.dashboardAddr, err)
	}
	settings, err := compat.LoadSchedulerSettings(compat.ConfigSources{File: o.configFile})
	if err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	hashSeed, seedDrawn, err := compat.HashSeedFromEnv(os.Getenv)
	if err != nil {
		return fmt.Errorf("invalid environment: %w", err)
	}
	log.Info().Float64("worker-saturation", settings.WorkerSaturation).
		Bool("root-task-co-assignment", settings.RootTaskCoAssignment).
		Int("root-task-co-assignment-depth", settings.RootTaskCoAssignmentDepth).
		Int("allowed-failures", settings.AllowedFailures).
		Dur("worker-ttl", settings.WorkerTTL).
		Str("compression", settings.CommCompression).
		Str("task-ordering", settings.TaskOrdering).
		Uint32("hash-seed", hashSeed).Bool("hash-seed-drawn", seedDrawn).
		Bool("work-stealing", settings.WorkStealing).
		Dur("work-stealing-interval", settings.WorkStealingInterval).
		Bool("active-memory-manager", settings.ActiveMemoryManager).
		Msg("configuration")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, err := server.Start(ctx, server.Config{
		Listen:          listenAddress(o.host, o.port),
		Engine:          engineConfig(settings),
		Python:          o.python,
		TaskOrdering:    settings.TaskOrdering,
		CheckOrder:      settings.TaskOrderingCheck,
		HashSeed:        hashSeed,
		Compression:     settings.CommCompression,
		ConnectionLimit: settings.ConnectionLimit,
		Logger:          log,
		Dashboard:       dashboard,
	})
	if err != nil {
		return err
	}
	if o.schedulerFile != "" {
		if err := writeSchedulerFile(ctx, o.schedulerFile, srv); err != nil {
			shutdown(srv, log)
			return err
		}
		defer os.Remove(o.schedulerFile) // as distributed does when the scheduler closes
	}
	log.Info().Str("address", srv.Addr()).Msg("Scheduler at")
	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down")
	case <-srv.Done():
		log.Info().Msg("terminated by a client")
	}
	shutdown(srv, log)
	return nil
}

func shutdown(srv *server.Server, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("connections still open at shutdown; closed them")
	}
}

// engineConfig maps dask's settings onto the engine's.
func engineConfig(st compat.SchedulerSettings) scheduler.Config {
	c := scheduler.Config{
		WorkerSaturation:             st.WorkerSaturation,
		RootTaskCoAssignment:         st.RootTaskCoAssignment,
		CoFamilyDepth:                st.RootTaskCoAssignmentDepth,
		RootishTaskgroup:             st.RootishTaskgroup,
		RootishTaskgroupDependencies: st.RootishTaskgroupDependencies,
		WorkerTTL:                    st.WorkerTTL,
		UnknownTaskDuration:          st.UnknownTaskDuration,
		Bandwidth:                    float64(st.Bandwidth),
		DefaultDataSize:              st.DefaultDataSize,
		ValidateInvariants:           st.ValidateInvariants,
		LeaseValidationInterval:      st.LeaseValidationInterval,
		NoWorkStealing:               !st.WorkStealing,
		WorkStealingInterval:         st.WorkStealingInterval,
		NoActiveMemoryManager:        !st.ActiveMemoryManager,
		ActiveMemoryManagerInterval:  st.ActiveMemoryManagerInterval,
		DefaultTaskDurations:         st.DefaultTaskDurations,
	}
	if c.CoFamilyDepth <= 0 { // the engine reads 0 as its default
		c.CoFamilyDepth = -1
	}
	if c.WorkerTTL == 0 { // null in dask config: never
		c.WorkerTTL = -1
	}
	if math.IsInf(st.WorkerSaturation, 1) {
		c.WorkerSaturation = math.Inf(1)
	}
	c.ExactAllowedFailures(st.AllowedFailures)
	return c
}

// listenAddress accepts what `dask scheduler --host` accepts: empty, a host,
// or a URI with scheme.
func listenAddress(host string, port int) string {
	if scheme, rest, ok := strings.Cut(host, "://"); ok {
		return scheme + "://" + net.JoinHostPort(rest, strconv.Itoa(port))
	}
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(port))
}

func portOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return 0, errors.New("port must be 0..65535")
	}
	return n, nil
}
