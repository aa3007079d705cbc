// Command dask-go-scheduler is a drop-in replacement for `dask scheduler`:
// stock dask Clients and `dask worker`s connect to it unchanged, and it
// takes `dask scheduler`'s command line (cli.go).
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
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/rs/zerolog/diode"
	"github.com/spf13/pflag"

	"daskgo/compat"
	"daskgo/scheduler/server"
)

func main() {
	runtimeDefaults()
	o, err := parseArgs(os.Args[1:], os.Stderr)
	if errors.Is(err, pflag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dask-go-scheduler: %v\n", err)
		os.Exit(2)
	}
	switch {
	case o.showVersion:
		fmt.Printf("dask-go-scheduler, version %s\n", version)
		return
	case o.listOps:
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

// serverConfig turns the command line and dask's configuration into the
// server's configuration; every unsupported request is an error here,
// before anything starts.
func serverConfig(o options, settings compat.SchedulerSettings, log zerolog.Logger) (server.Config, error) {
	if err := o.unsupported(); err != nil {
		return server.Config{}, err
	}
	sec, err := securityOf(o, settings)
	if err != nil {
		return server.Config{}, err
	}
	listen, err := o.listenAddress(settings.DefaultScheme, sec.requireEncryption)
	if err != nil {
		return server.Config{}, err
	}
	dash, err := o.dashboardListen()
	if err != nil {
		return server.Config{}, err
	}
	idle, err := o.idleTimeoutOr(settings.IdleTimeout)
	if err != nil {
		return server.Config{}, err
	}
	hashSeed, seedDrawn, err := compat.HashSeedFromEnv(os.Getenv)
	if err != nil {
		return server.Config{}, fmt.Errorf("invalid environment: %w", err)
	}
	log.Debug().Uint32("hash-seed", hashSeed).Bool("hash-seed-drawn", seedDrawn).Msg("string hashing")
	return server.Config{
		Listen:            listen,
		Engine:            settings.Engine,
		Python:            o.python,
		TaskOrdering:      settings.TaskOrdering,
		CheckOrder:        settings.TaskOrderingCheck,
		HashSeed:          hashSeed,
		Compression:       settings.CommCompression,
		ConnectionLimit:   settings.ConnectionLimit,
		IdleTimeout:       idle,
		TLS:               sec.tls,
		RequireEncryption: sec.requireEncryption,
		ConnectTimeout:    settings.ConnectTimeout,
		TCPTimeout:        settings.TCPTimeout,
		Logger:            log,
		Preload:           orStrings(o.preload, settings.Preload),
		PreloadArgv:       orStrings(o.preloadArgv, settings.PreloadArgv),
		Dashboard: server.DashboardConfig{
			Addr:             dash,
			Prefix:           o.dashboardPrefix,
			TLS:              sec.dashboard,
			Routes:           settings.HTTPRoutes,
			NoPages:          !o.dashboard,
			Version:          version,
			TaskStreamLength: settings.TaskStreamLength,
		},
	}, nil
}

func run(o options) error {
	level, err := zerolog.ParseLevel(o.logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	sink := logSink()
	defer sink.Close() // after shutdown: writes what is still buffered
	zerolog.TimeFieldFormat = logTimeFormat
	log := zerolog.New(sink).Level(level).With().Timestamp().Logger()
	settings, err := compat.LoadSchedulerSettings(compat.ConfigSources{File: o.configFile})
	if err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	for _, w := range settings.Warnings() {
		log.Warn().Msg(w)
	}
	cfg, err := serverConfig(o, settings, log)
	if err != nil {
		return err
	}
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
	removePID, err := writePIDFile(o.pidFile)
	if err != nil {
		return err
	}
	defer removePID()
	e := settings.Engine
	log.Info().Float64("worker-saturation", e.WorkerSaturation).
		Bool("root-task-co-assignment", e.RootTaskCoAssignment).
		Int("root-task-co-assignment-depth", max(e.CoFamilyDepth, 0)). // Off as dask spells it
		Int("allowed-failures", max(e.AllowedFailures, 0)).
		Dur("worker-ttl", max(e.WorkerTTL, 0)). // 0: never
		Str("compression", settings.CommCompression).
		Str("task-ordering", settings.TaskOrdering).
		Bool("work-stealing", !e.NoWorkStealing).
		Dur("work-stealing-interval", e.WorkStealingInterval).
		Bool("active-memory-manager", !e.NoActiveMemoryManager).
		Dur("idle-timeout", max(cfg.IdleTimeout, 0)).
		Msg("configuration")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, err := server.Start(ctx, cfg)
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
	if p := srv.DashboardPort(); p != 0 {
		log.Info().Int("port", p).Str("prefix", o.dashboardPrefix).Msg("dashboard at")
	}
	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down")
	case <-srv.Done():
		log.Info().Msg("terminated by a client")
	}
	shutdown(srv, log)
	return nil
}

// logSink is the log's writer: stderr behind a lock-free buffer that never
// blocks the goroutine that logs (zerolog's diode). A parent process that
// stops reading our stderr (a full pipe) must not stall whoever logs, and
// the engine's lock holder logs (scheduler/server/doc.go). Lines that find
// the buffer full are dropped and counted; a writer goroutine polls the
// buffer every logPoll.
func logSink() diode.Writer {
	return diode.NewWriter(stderrWriter{}, logBuffer, logPoll, func(missed int) {
		fmt.Fprintf(os.Stderr, "dask-go-scheduler: %d log lines dropped: stderr is not read fast enough\n", missed)
	})
}

// logTimeFormat stamps log lines to the millisecond, as distributed's
// logging does: a round trip's stages are milliseconds apart.
const logTimeFormat = "2006-01-02T15:04:05.000Z07:00"

const (
	logBuffer = 10000                 // lines
	logPoll   = 25 * time.Millisecond // a line waits at most this long
)

// stderrWriter is os.Stderr without its Close, which diode.Writer.Close
// would call.
type stderrWriter struct{}

func (stderrWriter) Write(p []byte) (int, error) { return os.Stderr.Write(p) }

func shutdown(srv *server.Server, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("connections still open at shutdown; closed them")
	}
}

// orStrings is a if it has items, else b: Scheduler.__init__ reads the
// config's preload and preload-argv only when none were given.
func orStrings(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}
