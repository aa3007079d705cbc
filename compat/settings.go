package compat

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"daskgo/protocol"
)

// defaultsYAML holds the defaults of the keys SchedulerSettings reads, with
// distributed/distributed.yaml's values (2026.8.0) and spelling, plus our
// own root-task-co-assignment, root-task-co-assignment-depth, task-ordering
// and task-ordering-check keys.
// Being YAML, it takes part in dask's "_"/"-" canonicalization exactly as
// distributed.yaml does.
const defaultsYAML = `
distributed:
  admin:
    low-level-log-length: 1000
  scheduler:
    allowed-failures: 3
    bandwidth: 100000000
    default-data-size: 1kiB
    idle-timeout: null
    no-workers-timeout: null
    work-stealing: true
    work-stealing-interval: 1s
    active-memory-manager:
      start: true
      interval: 2s
      policies:
        - class: distributed.active_memory_manager.ReduceReplicas
    worker-saturation: 1.1
    rootish-taskgroup: 5
    rootish-taskgroup-dependencies: 5
    root-task-co-assignment: false
    root-task-co-assignment-depth: 4
    task-ordering: go
    task-ordering-check: false
    connection-limit: null
    worker-ttl: "5 minutes"
    unknown-task-duration: 500ms
    default-task-durations:
      rechunk-split: 1us
      split-shuffle: 1us
      split-taskshuffle: 1us
      split-stage: 1us
    validate: false
    locks:
      lease-validation-interval: 10s
    dashboard:
      status:
        task-stream-length: 1000
      tls:
        ca-file: null
        key: null
        cert: null
    http:
      routes:
        - distributed.http.scheduler.prometheus
        - distributed.http.scheduler.info
        - distributed.http.scheduler.json
        - distributed.http.health
        - distributed.http.proxy
        - distributed.http.statics
  worker:
    memory:
      recent-to-old-time: 30s
  comm:
    compression: false
    default-scheme: tcp
    require-encryption: null
    tls:
      ciphers: null
      min-version: 1.2
      max-version: null
      ca-file: null
      scheduler:
        cert: null
        key: null
    timeouts:
      connect: 30s
      tcp: 30s
`

// SchedulerSettings are the dask configuration values that shape the
// scheduler's behaviour (the distributed.scheduler.* and distributed.comm.*
// keys of distributed/distributed.yaml that SchedulerState.__init__ and
// distributed/comm read), typed and validated.
type SchedulerSettings struct {
	// WorkerSaturation: queued root tasks per worker thread; +Inf disables
	// queuing (distributed.scheduler.worker-saturation).
	WorkerSaturation float64
	// RootTaskCoAssignment: with a finite worker-saturation, hand queued
	// root tasks out by families (the roots a reduction joins) per worker,
	// so siblings of a reduction share a worker (distributed.scheduler.root-task-co-assignment,
	// ours; default false; scheduler/WITHHOLDING.md).
	RootTaskCoAssignment bool
	// RootTaskCoAssignmentDepth: co-assignment keeps together the roots
	// that reach a common task within this many levels of dependents; 0 or
	// less hands out contiguous priority ranges instead
	// (distributed.scheduler.root-task-co-assignment-depth, ours; default 4).
	RootTaskCoAssignmentDepth int
	// AllowedFailures: unexpected worker deaths a task survives before
	// KilledWorker.
	AllowedFailures int
	// WorkerTTL: remove a worker silent for this long; 0 = never (null).
	WorkerTTL                    time.Duration
	RootishTaskgroup             int
	RootishTaskgroupDependencies int
	UnknownTaskDuration          time.Duration
	// DefaultTaskDurations by task prefix.
	DefaultTaskDurations map[string]time.Duration
	Bandwidth            int64 // bytes per second
	DefaultDataSize      int64 // bytes
	WorkStealing         bool
	WorkStealingInterval time.Duration
	// ActiveMemoryManager, ActiveMemoryManagerInterval:
	// distributed.scheduler.active-memory-manager.start and .interval (the
	// ReduceReplicas policy, scheduler/amm.go; .policies may list only
	// ReduceReplicas, an empty list turns the AMM off, anything else is an
	// error).
	ActiveMemoryManager         bool
	ActiveMemoryManagerInterval time.Duration
	// AMMPolicy: .policies lists ReduceReplicas, so a manager started
	// later (Client.amm.start) has a policy to run.
	AMMPolicy bool
	// MemoryRecentToOldTime: distributed.worker.memory.recent-to-old-time,
	// how long unmanaged memory must last to count as unmanaged_old.
	MemoryRecentToOldTime time.Duration
	NoWorkersTimeout      time.Duration // 0 = off (null)
	IdleTimeout           time.Duration // 0 = off (null)
	// LeaseValidationInterval: how often semaphore leases are checked for
	// timeouts (distributed.scheduler.locks.lease-validation-interval).
	LeaseValidationInterval time.Duration
	// CommCompression: "" (false/null) or "lz4" ("auto" resolves to lz4).
	CommCompression string
	ConnectTimeout  time.Duration
	TCPTimeout      time.Duration
	// ValidateInvariants is distributed.scheduler.validate: check every invariant
	// after every step (slow; for debugging).
	ValidateInvariants bool
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
	// and nannies; 0 (null) means distributed's rule, half the process's
	// file-descriptor limit (Scheduler.__init__'s connection_limit).
	// distributed.scheduler.connection-limit, ours: distributed has no key.
	ConnectionLimit int
	// HTTPRoutes are the route modules the dashboard address serves
	// (distributed.scheduler.http.routes; scheduler/server/web).
	HTTPRoutes []string
	// Preload and PreloadArgv are the modules the scheduler-side Python
	// host runs at start (dask_setup) and their click arguments
	// (distributed.scheduler.preload, preload-argv; --preload wins).
	Preload, PreloadArgv []string
	// LowLevelLogLength bounds the transition log (SchedulerState's
	// transition_log, which Client.story reads) and each event topic's
	// deque (Broker), as distributed.admin.low-level-log-length does.
	LowLevelLogLength int
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

// LoadSchedulerSettings reads dask configuration from src and returns the
// validated settings.
func LoadSchedulerSettings(src ConfigSources) (SchedulerSettings, error) {
	cfg, err := LoadDaskConfig(src)
	if err != nil {
		return SchedulerSettings{}, err
	}
	return SchedulerSettingsFrom(cfg)
}

// SchedulerSettingsFrom converts a merged configuration. Every bad value is
// reported, each naming its key and what it accepts.
func SchedulerSettingsFrom(cfg *DaskConfig) (SchedulerSettings, error) {
	r := reader{cfg: cfg}
	s := SchedulerSettings{
		WorkerSaturation:             r.saturation("distributed.scheduler.worker-saturation"),
		RootTaskCoAssignment:         r.boolean("distributed.scheduler.root-task-co-assignment"),
		RootTaskCoAssignmentDepth:    r.integer("distributed.scheduler.root-task-co-assignment-depth"),
		AllowedFailures:              r.integer("distributed.scheduler.allowed-failures"),
		WorkerTTL:                    r.optDuration("distributed.scheduler.worker-ttl"),
		RootishTaskgroup:             r.integer("distributed.scheduler.rootish-taskgroup"),
		RootishTaskgroupDependencies: r.integer("distributed.scheduler.rootish-taskgroup-dependencies"),
		UnknownTaskDuration:          r.duration("distributed.scheduler.unknown-task-duration"),
		DefaultTaskDurations:         r.durations("distributed.scheduler.default-task-durations"),
		Bandwidth:                    r.bytes("distributed.scheduler.bandwidth"),
		DefaultDataSize:              r.bytes("distributed.scheduler.default-data-size"),
		WorkStealing:                 r.boolean("distributed.scheduler.work-stealing"),
		WorkStealingInterval:         r.duration("distributed.scheduler.work-stealing-interval"),
		ActiveMemoryManager:          r.boolean("distributed.scheduler.active-memory-manager.start"),
		ActiveMemoryManagerInterval:  r.duration("distributed.scheduler.active-memory-manager.interval"),
		MemoryRecentToOldTime:        r.duration("distributed.worker.memory.recent-to-old-time"),
		NoWorkersTimeout:             r.optDuration("distributed.scheduler.no-workers-timeout"),
		IdleTimeout:                  r.optDuration("distributed.scheduler.idle-timeout"),
		LeaseValidationInterval:      r.duration("distributed.scheduler.locks.lease-validation-interval"),
		CommCompression:              r.compression("distributed.comm.compression"),
		ConnectTimeout:               r.duration("distributed.comm.timeouts.connect"),
		TCPTimeout:                   r.duration("distributed.comm.timeouts.tcp"),
		ValidateInvariants:           r.boolean("distributed.scheduler.validate"),
		TaskOrdering:                 r.choice("distributed.scheduler.task-ordering", "go", "python"),
		TaskOrderingCheck:            r.boolean("distributed.scheduler.task-ordering-check"),
		ConnectionLimit:              r.optInteger("distributed.scheduler.connection-limit"),
		HTTPRoutes:                   r.strings("distributed.scheduler.http.routes"),
		Preload:                      r.stringOrStrings("distributed.scheduler.preload"),
		PreloadArgv:                  r.stringOrStrings("distributed.scheduler.preload-argv"),
		TaskStreamLength:             r.integer("distributed.scheduler.dashboard.status.task-stream-length"),
		LowLevelLogLength:            r.integer("distributed.admin.low-level-log-length"),
		TLS: TLSSettings{
			CAFile:     r.optString("distributed.comm.tls.ca-file"),
			Cert:       r.optString("distributed.comm.tls.scheduler.cert"),
			Key:        r.optString("distributed.comm.tls.scheduler.key"),
			MinVersion: r.get("distributed.comm.tls.min-version"),
			MaxVersion: r.get("distributed.comm.tls.max-version"),
			Ciphers:    r.optString("distributed.comm.tls.ciphers"),
		},
		RequireEncryption: r.optBool("distributed.comm.require-encryption"),
		DefaultScheme:     r.choice("distributed.comm.default-scheme", "tcp", "tls"),
		DashboardTLS: TLSSettings{
			CAFile: r.optString("distributed.scheduler.dashboard.tls.ca-file"),
			Cert:   r.optString("distributed.scheduler.dashboard.tls.cert"),
			Key:    r.optString("distributed.scheduler.dashboard.tls.key"),
		},
	}
	s.AMMPolicy = r.ammPolicies("distributed.scheduler.active-memory-manager.policies")
	if !s.AMMPolicy {
		s.ActiveMemoryManager = false // no policy: the AMM would do nothing
	}
	if err := errors.Join(r.errs...); err != nil {
		return s, err
	}
	return s, s.Validate()
}

// Validate rejects values the scheduler cannot work with, naming the dask
// key of each.
func (s *SchedulerSettings) Validate() error {
	var errs []error
	bad := func(key string, v any, accepted string) {
		errs = append(errs, fmt.Errorf("%s: %s is not %s", key, pyRepr(v), accepted))
	}
	if !(s.WorkerSaturation > 0) {
		bad("distributed.scheduler.worker-saturation", s.WorkerSaturation, `a number > 0 or "inf"`)
	}
	for key, n := range map[string]int{
		"distributed.scheduler.connection-limit":               s.ConnectionLimit,
		"distributed.scheduler.allowed-failures":               s.AllowedFailures,
		"distributed.scheduler.rootish-taskgroup":              s.RootishTaskgroup,
		"distributed.scheduler.rootish-taskgroup-dependencies": s.RootishTaskgroupDependencies,
	} {
		if n < 0 {
			bad(key, n, "an integer >= 0")
		}
	}
	if s.LowLevelLogLength < 1 { // distributed's deque(maxlen=0) would keep no story at all
		bad("distributed.admin.low-level-log-length", s.LowLevelLogLength, "an integer >= 1")
	}
	if s.Bandwidth <= 0 {
		bad("distributed.scheduler.bandwidth", s.Bandwidth, "a byte size > 0")
	}
	if s.DefaultDataSize < 0 {
		bad("distributed.scheduler.default-data-size", s.DefaultDataSize, "a byte size >= 0")
	}
	for key, d := range map[string]time.Duration{
		"distributed.scheduler.worker-ttl":                      s.WorkerTTL,
		"distributed.scheduler.unknown-task-duration":           s.UnknownTaskDuration,
		"distributed.scheduler.work-stealing-interval":          s.WorkStealingInterval,
		"distributed.scheduler.no-workers-timeout":              s.NoWorkersTimeout,
		"distributed.scheduler.idle-timeout":                    s.IdleTimeout,
		"distributed.comm.timeouts.connect":                     s.ConnectTimeout,
		"distributed.comm.timeouts.tcp":                         s.TCPTimeout,
		"distributed.scheduler.locks.lease-validation-interval": s.LeaseValidationInterval,
	} {
		if d < 0 {
			bad(key, d.String(), "a duration >= 0")
		}
	}
	if s.ActiveMemoryManager && s.ActiveMemoryManagerInterval <= 0 {
		bad("distributed.scheduler.active-memory-manager.interval", s.ActiveMemoryManagerInterval.String(), "a duration > 0 while the active memory manager is on")
	}
	if s.WorkStealing && s.WorkStealingInterval <= 0 {
		bad("distributed.scheduler.work-stealing-interval", s.WorkStealingInterval.String(), "a duration > 0 while work-stealing is on")
	}
	if !protocol.SupportedCompression(s.CommCompression) {
		bad("distributed.comm.compression", s.CommCompression, `one of false, null, "auto", "lz4"`)
	}
	return errors.Join(errs...)
}

// reader converts config values, collecting one error per bad key.
type reader struct {
	cfg  *DaskConfig
	errs []error
}

func (r *reader) get(key string) any {
	v, _ := r.cfg.Get(key)
	return v
}

func (r *reader) bad(key string, v any, accepted string) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s is not %s", key, pyRepr(v), accepted))
}

// saturation mirrors SchedulerState.__init__: "inf" (the only way to
// write infinity in some config sources) or a number > 0. YAML's .inf and
// float("inf") arrive as +Inf floats.
func (r *reader) saturation(key string) float64 {
	v := r.get(key)
	if s, ok := v.(string); ok {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "inf", ".inf", "+inf", "infinity":
			return math.Inf(1)
		}
	}
	f, ok := number(v)
	if !ok || !(f > 0) {
		r.bad(key, v, `a number > 0 or "inf"`)
		return 0
	}
	return f
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, !math.IsNaN(x)
	}
	return 0, false
}

func (r *reader) integer(key string) int {
	v := r.get(key)
	f, ok := number(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		r.bad(key, v, "an integer")
		return 0
	}
	return int(f)
}

// optString is a string or null ("").
func (r *reader) optString(key string) string {
	v := r.get(key)
	if v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.bad(key, v, "a string or null")
	}
	return s
}

// optBool is a boolean or null (nil).
func (r *reader) optBool(key string) *bool {
	if r.get(key) == nil {
		return nil
	}
	b := r.boolean(key)
	return &b
}

// strings is a list of strings.
func (r *reader) strings(key string) []string {
	v := r.get(key)
	list, ok := v.([]any)
	if !ok {
		r.bad(key, v, "a list of strings")
		return nil
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			r.bad(key, v, "a list of strings")
			return nil
		}
		out = append(out, s)
	}
	return out
}

// stringOrStrings is a string (one item) or a list of strings; null or
// absent is none.
func (r *reader) stringOrStrings(key string) []string {
	switch v := r.get(key).(type) {
	case nil:
		return nil
	case string:
		if v == "" {
			return nil
		}
		return []string{v}
	}
	if l := r.strings(key); len(l) > 0 {
		return l
	}
	return nil // [] as absent, like the built-in defaults
}

// optInteger is an integer where null means "the default" (0).
func (r *reader) optInteger(key string) int {
	if r.get(key) == nil {
		return 0
	}
	return r.integer(key)
}

// boolean accepts YAML 1.1's yes/no/on/off too: dask reads files with
// PyYAML, which treats them as booleans.
func (r *reader) boolean(key string) bool {
	v := r.get(key)
	switch x := v.(type) {
	case bool:
		return x
	case string:
		switch strings.ToLower(x) {
		case "true", "yes", "on":
			return true
		case "false", "no", "off":
			return false
		}
	}
	r.bad(key, v, "true or false")
	return false
}

func (r *reader) duration(key string) time.Duration {
	v := r.get(key)
	d, err := ParseTimedelta(v)
	if err != nil {
		r.bad(key, v, `a duration such as "500ms", "30s", "5 minutes" or a number of seconds`)
	}
	return d
}

// optDuration is a duration where null (or false) means "off" (0).
func (r *reader) optDuration(key string) time.Duration {
	switch r.get(key) {
	case nil, false:
		return 0
	}
	return r.duration(key)
}

func (r *reader) durations(key string) map[string]time.Duration {
	v := r.get(key)
	d, ok := v.(map[string]any)
	if !ok {
		if v != nil {
			r.bad(key, v, "a mapping of task prefix to duration")
		}
		return map[string]time.Duration{}
	}
	out := make(map[string]time.Duration, len(d))
	for prefix, pv := range d {
		dur, err := ParseTimedelta(pv)
		if err != nil {
			r.bad(key+"."+prefix, pv, "a duration")
		}
		out[prefix] = dur
	}
	return out
}

// reduceReplicasClass is the one AMM policy scheduler/amm.go implements.
const reduceReplicasClass = "distributed.active_memory_manager.ReduceReplicas"

// ammPolicies reads the AMM's policy list (ActiveMemoryManagerExtension.
// __init__ imports each entry's class and passes its other keys to the
// constructor) and reports whether ReduceReplicas is in it. Any other
// policy, or arguments ReduceReplicas does not take, is an error naming
// it: a scheduler that silently ran a different AMM than configured would
// hold different memory than its user expects.
func (r *reader) ammPolicies(key string) bool {
	v := r.get(key)
	list, ok := v.([]any)
	if !ok {
		if v != nil {
			r.bad(key, v, "a list of policies")
		}
		return false
	}
	found := false
	for i, item := range list {
		ikey := fmt.Sprintf("%s[%d]", key, i)
		p, ok := item.(map[string]any)
		if !ok {
			r.bad(ikey, item, `a mapping with a "class" key`)
			continue
		}
		class, _ := p["class"].(string)
		if class != reduceReplicasClass {
			r.bad(ikey+".class", p["class"], reduceReplicasClass+" (the only active memory manager policy this scheduler implements)")
			continue
		}
		if len(p) > 1 {
			r.bad(ikey, item, "ReduceReplicas without arguments (it takes none)")
			continue
		}
		found = true
	}
	return found
}

func (r *reader) bytes(key string) int64 {
	v := r.get(key)
	n, err := parseBytes(v)
	if err != nil {
		r.bad(key, v, `a byte size such as 1000000, "100 MB" or "1 KiB"`)
	}
	return n
}

// choice is one of a few strings, case-insensitively.
func (r *reader) choice(key string, choices ...string) string {
	v := r.get(key)
	if s, ok := v.(string); ok {
		for _, c := range choices {
			if strings.EqualFold(strings.TrimSpace(s), c) {
				return c
			}
		}
	}
	r.bad(key, v, "one of "+strings.Join(choices, ", "))
	return choices[0]
}

// compression accepts what distributed accepts and Go can do: false/null
// (none), "auto" (lz4, as Python resolves it where lz4 is installed), "lz4".
func (r *reader) compression(key string) string {
	v := r.get(key)
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		if !x {
			return ""
		}
	case string:
		switch strings.ToLower(x) {
		case "", "false", "none", "null":
			return ""
		case "auto", "lz4":
			return "lz4"
		}
	}
	r.bad(key, v, `one of false, null, "auto", "lz4" (dask-go-scheduler implements lz4 only)`)
	return ""
}
