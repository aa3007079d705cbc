package compat

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/viper"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// SchedulerSettings are the dask configuration values that shape the
// scheduler's behaviour (the distributed.scheduler.* and distributed.comm.*
// keys of distributed/distributed.yaml that SchedulerState.__init__ and
// distributed/comm read), typed and validated. Engine is the engine's
// configuration as it is passed on; the other fields are the server's.
type SchedulerSettings struct {
	// Engine holds every key the engine reads, in the engine's own terms
	// (scheduler.Never for a null duration, scheduler.Off for a count
	// whose feature is off).
	Engine scheduler.Config
	// IdleTimeout closes the scheduler once idle that long
	// (distributed.scheduler.idle-timeout); scheduler.Never when null or 0,
	// as distributed's `if self.idle_timeout` reads them.
	IdleTimeout time.Duration
	// CommCompression: "" (false/null) or "lz4" ("auto" resolves to lz4).
	CommCompression string
	ConnectTimeout  time.Duration // distributed.comm.timeouts.connect
	TCPTimeout      time.Duration // distributed.comm.timeouts.tcp
	// TaskOrdering is who computes dask.order's priorities: "go" (the port in
	// compat/order, default) or "python" (dask.order.order in the
	// materializer helper, as distributed does: the fallback for a dask
	// version the port has not been checked against).
	// distributed.scheduler.task-ordering, ours.
	TaskOrdering string
	// TaskOrderingCheck: the helper also runs dask.order.order (with string
	// hashing fixed) and every difference from Go's priorities is logged as
	// an error. For tests and for checking a new dask version.
	// distributed.scheduler.task-ordering-check, ours.
	TaskOrderingCheck bool
	// ConnectionLimit bounds the scheduler's pool of connections to workers
	// and nannies; its default, 0 (null), is distributed's rule, half the
	// process's file-descriptor limit (Scheduler.__init__'s connection_limit).
	// distributed.scheduler.connection-limit, ours: distributed has no key.
	ConnectionLimit int
	// HTTPRoutes are the route modules the dashboard address serves
	// (distributed.scheduler.http.routes; scheduler/server/web).
	HTTPRoutes []string
	// Preload and PreloadArgv are the modules the scheduler-side Python
	// host runs at start (dask_setup) and their click arguments
	// (distributed.scheduler.preload, preload-argv; --preload wins).
	Preload, PreloadArgv []string
	// TaskStreamLength: task runs the dashboard's task stream keeps
	// (distributed.scheduler.dashboard.status.task-stream-length).
	TaskStreamLength int
	// TLS is the scheduler role's distributed.comm.tls.* (ca-file,
	// scheduler.cert and .key, min-version, max-version, ciphers); empty
	// paths when unset.
	TLS TLSSettings
	// RequireEncryption is distributed.comm.require-encryption: nil when
	// null (then, as Security does, true exactly when TLS flags are given).
	RequireEncryption *bool
	// DefaultScheme: distributed.comm.default-scheme, for a listen address
	// without one.
	DefaultScheme string
	// DashboardTLS is distributed.scheduler.dashboard.tls.* (cert, key,
	// ca-file): HTTPS on the dashboard address when cert is set.
	DashboardTLS TLSSettings
}

// TLSSettings are TLS file paths (or PEM text) and versions as dask
// config spells them; comm.TLSSettings is built from them.
type TLSSettings struct {
	CAFile, Cert, Key      string
	MinVersion, MaxVersion any // 1.2, 1.3 or nil
	Ciphers                string
}

// DefaultSettings are distributed.yaml's values: the engine's from
// scheduler.DefaultConfig, the server's here. They become viper's defaults
// (LoadConfig), so a key no file or variable sets reads as this.
func DefaultSettings() SchedulerSettings {
	return SchedulerSettings{
		Engine:         scheduler.DefaultConfig(),
		IdleTimeout:    scheduler.Never,
		ConnectTimeout: 30 * time.Second,
		TCPTimeout:     30 * time.Second,
		TaskOrdering:   "go",
		HTTPRoutes: []string{
			"distributed.http.scheduler.prometheus",
			"distributed.http.scheduler.info",
			"distributed.http.scheduler.json",
			"distributed.http.health",
			"distributed.http.proxy",
			"distributed.http.statics",
		},
		TaskStreamLength: 1000,
		TLS:              TLSSettings{MinVersion: 1.2},
		DefaultScheme:    "tcp",
	}
}

// keys binds each dask key to the field of s it fills and the way dask
// spells its value. It is the one list of keys: LoadConfig sets viper's
// defaults from it, SchedulerSettingsFrom reads through it.
func (s *SchedulerSettings) keys() []setting {
	e := &s.Engine
	const sched, comm = "distributed.scheduler.", "distributed.comm."
	return []setting{
		{sched + "worker-saturation", saturationKind, &e.WorkerSaturation},
		{sched + "root-task-co-assignment", boolKind, &e.RootTaskCoAssignment},
		{sched + "root-task-co-assignment-depth", depthKind, &e.CoFamilyDepth},
		{sched + "allowed-failures", failuresKind, &e.AllowedFailures},
		{sched + "worker-ttl", optDurationKind, &e.WorkerTTL},
		{sched + "rootish-taskgroup", intKind, &e.RootishTaskgroup},
		{sched + "rootish-taskgroup-dependencies", intKind, &e.RootishTaskgroupDependencies},
		{sched + "unknown-task-duration", durationKind, &e.UnknownTaskDuration},
		{sched + "default-task-durations", durationsKind, &e.DefaultTaskDurations},
		{sched + "bandwidth", bandwidthKind, &e.Bandwidth},
		{sched + "default-data-size", bytesKind, &e.DefaultDataSize},
		{sched + "work-stealing", notBoolKind, &e.NoWorkStealing},
		{sched + "work-stealing-interval", durationKind, &e.WorkStealingInterval},
		{sched + "active-memory-manager.start", notBoolKind, &e.NoActiveMemoryManager},
		{sched + "active-memory-manager.interval", durationKind, &e.ActiveMemoryManagerInterval},
		{sched + "active-memory-manager.policies", ammPoliciesKind, &e.NoAMMPolicy},
		{"distributed.worker.memory.recent-to-old-time", durationKind, &e.MemoryRecentToOldTime},
		{sched + "no-workers-timeout", optDurationKind, &e.NoWorkersTimeout},
		{sched + "locks.lease-validation-interval", durationKind, &e.LeaseValidationInterval},
		{sched + "validate", boolKind, &e.ValidateInvariants},
		// the transition log (what Client.story reads) and each event
		// topic's deque; EventLogLength follows it (SchedulerSettingsFrom)
		{"distributed.admin.low-level-log-length", intKind, &e.TransitionLogSize},
		{sched + "idle-timeout", optDurationKind, &s.IdleTimeout},
		{comm + "compression", compressionKind, &s.CommCompression},
		{comm + "timeouts.connect", durationKind, &s.ConnectTimeout},
		{comm + "timeouts.tcp", durationKind, &s.TCPTimeout},
		{sched + "task-ordering", choiceKind("go", "python"), &s.TaskOrdering},
		{sched + "task-ordering-check", boolKind, &s.TaskOrderingCheck},
		{sched + "connection-limit", optIntKind, &s.ConnectionLimit},
		{sched + "http.routes", stringsKind, &s.HTTPRoutes},
		{sched + "preload", stringOrStringsKind, &s.Preload},
		{sched + "preload-argv", stringOrStringsKind, &s.PreloadArgv},
		{sched + "dashboard.status.task-stream-length", intKind, &s.TaskStreamLength},
		{comm + "tls.ca-file", optStringKind, &s.TLS.CAFile},
		{comm + "tls.scheduler.cert", optStringKind, &s.TLS.Cert},
		{comm + "tls.scheduler.key", optStringKind, &s.TLS.Key},
		{comm + "tls.min-version", anyKind, &s.TLS.MinVersion},
		{comm + "tls.max-version", anyKind, &s.TLS.MaxVersion},
		{comm + "tls.ciphers", optStringKind, &s.TLS.Ciphers},
		{comm + "require-encryption", optBoolKind, &s.RequireEncryption},
		{comm + "default-scheme", choiceKind("tcp", "tls"), &s.DefaultScheme},
		{sched + "dashboard.tls.ca-file", optStringKind, &s.DashboardTLS.CAFile},
		{sched + "dashboard.tls.cert", optStringKind, &s.DashboardTLS.Cert},
		{sched + "dashboard.tls.key", optStringKind, &s.DashboardTLS.Key},
	}
}

// LoadSchedulerSettings reads dask configuration from src and returns the
// validated settings.
func LoadSchedulerSettings(src ConfigSources) (SchedulerSettings, error) {
	v, err := LoadConfig(src)
	if err != nil {
		return SchedulerSettings{}, err
	}
	return SchedulerSettingsFrom(v)
}

// SchedulerSettingsFrom reads the settings from a loaded configuration.
// Every bad value is reported, each naming its key and what it accepts.
func SchedulerSettingsFrom(v *viper.Viper) (SchedulerSettings, error) {
	s := DefaultSettings() // the fields no key sets keep their defaults
	r := reader{v: v}
	for _, k := range s.keys() {
		k.kind.read(&r, k.key, k.field)
	}
	e := &s.Engine
	e.EventLogLength = e.TransitionLogSize
	if e.NoAMMPolicy {
		e.NoActiveMemoryManager = true // no policy: the AMM would do nothing
	}
	if err := errors.Join(r.errs...); err != nil {
		return s, err
	}
	return s, s.Validate()
}

// minStockTCPTimeout is the least distributed.comm.timeouts.tcp a stock
// dask process accepts: distributed.comm.tcp.set_tcp_timeout asserts
// timeout >= nprobes + 1 (10 keepalive probes) on every connection it makes.
const minStockTCPTimeout = 11 * time.Second

// Warnings names values this scheduler works with but stock dask processes
// reading the same configuration refuse. A config file is usually shared by
// the scheduler and its workers and clients; said at the scheduler's start,
// the cause shows before the workers fail to connect.
func (s *SchedulerSettings) Warnings() []string {
	var w []string
	if d := s.TCPTimeout; d < minStockTCPTimeout {
		ours := "keepalive and TCP_USER_TIMEOUT at " + d.String()
		if d == 0 { // negative is refused by Validate
			ours = "its default, 30s,"
		}
		w = append(w, fmt.Sprintf("distributed.comm.timeouts.tcp: %s is under %s; this scheduler uses %s, "+
			"but a stock dask process with the same configuration fails every connection it makes "+
			"(distributed.comm.tcp.set_tcp_timeout asserts timeout >= 11 s)", d, minStockTCPTimeout, ours))
	}
	return w
}

// Validate rejects values the scheduler cannot work with, naming the dask
// key of each.
func (s *SchedulerSettings) Validate() error {
	var errs []error
	bad := func(key string, v any, accepted string) {
		errs = append(errs, fmt.Errorf("%s: %s is not %s", key, pyRepr(v), accepted))
	}
	e := &s.Engine
	for key, n := range map[string]int{
		"distributed.scheduler.connection-limit":               s.ConnectionLimit,
		"distributed.scheduler.rootish-taskgroup":              e.RootishTaskgroup,
		"distributed.scheduler.rootish-taskgroup-dependencies": e.RootishTaskgroupDependencies,
	} {
		if n < 0 {
			bad(key, n, "an integer >= 0")
		}
	}
	if e.TransitionLogSize < 1 { // distributed's deque(maxlen=0) would keep no story at all
		bad("distributed.admin.low-level-log-length", e.TransitionLogSize, "an integer >= 1")
	}
	if e.Bandwidth <= 0 {
		bad("distributed.scheduler.bandwidth", e.Bandwidth, "a byte size > 0")
	}
	if e.DefaultDataSize < 0 {
		bad("distributed.scheduler.default-data-size", e.DefaultDataSize, "a byte size >= 0")
	}
	for key, d := range map[string]time.Duration{
		"distributed.scheduler.unknown-task-duration":           e.UnknownTaskDuration,
		"distributed.scheduler.work-stealing-interval":          e.WorkStealingInterval,
		"distributed.comm.timeouts.connect":                     s.ConnectTimeout,
		"distributed.comm.timeouts.tcp":                         s.TCPTimeout,
		"distributed.scheduler.locks.lease-validation-interval": e.LeaseValidationInterval,
	} {
		if d < 0 {
			bad(key, d.String(), "a duration >= 0")
		}
	}
	if !e.NoActiveMemoryManager && e.ActiveMemoryManagerInterval <= 0 {
		bad("distributed.scheduler.active-memory-manager.interval", e.ActiveMemoryManagerInterval.String(), "a duration > 0 while the active memory manager is on")
	}
	if !e.NoWorkStealing && e.WorkStealingInterval <= 0 {
		bad("distributed.scheduler.work-stealing-interval", e.WorkStealingInterval.String(), "a duration > 0 while work-stealing is on")
	}
	if !protocol.SupportedCompression(s.CommCompression) {
		bad("distributed.comm.compression", s.CommCompression, `one of false, null, "auto", "lz4"`)
	}
	return errors.Join(errs...)
}
