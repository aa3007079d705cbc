package compat

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"daskgo/protocol"
)

// The scheduler-side Python host: one Python process, started on the first
// request that needs Python inside the scheduler (run_on_scheduler, a
// handler a plugin registered; a preload starts it with the server), that
// keeps state for as long as it lives: plugins, extensions, handlers,
// objects that run_on_scheduler functions leave behind. Until then it
// costs nothing. It sits on the supervised-process piece (proc_*.go); what
// is its own is here: the Python modules it runs (hostModules), the
// services Go offers it (Serve), the ops it forwards (Forwards), and what
// its death loses (OnExit).
//
// The engine never waits on the host: Call blocks only its caller (an RPC
// goroutine, never one holding the engine's lock), and Post queues at most
// maxPosts one-way messages per host, dropping (and counting) the rest.

//go:embed host.py
var hostPy string

//go:embed host_scheduler.py
var hostSchedulerPy string

//go:embed host_run.py
var hostRunPy string

//go:embed host_feed.py
var hostFeedPy string

//go:embed host_perf.py
var hostPerfPy string

//go:embed host_spans.py
var hostSpansPy string

// hostWireVersion must equal host.WIRE_VERSION.
const hostWireVersion = 1

// hostModules are the host's Python modules, in the order they are
// installed (each may import those before it); host.main runs after them.
// A module adds request handlers with @host.request("op") and message
// handlers with @host.message("op") (compat/host.py). helper_wire, whose
// framing the host's pipe uses, comes after host, not first: it imports
// distributed, which host.py lets happen only once it has moved fd 1
// aside.
var hostModules = []pySource{
	{"host", hostPy},
	{"helper_wire", helperWireScript},
	{"uploads", uploadsPy},
	{"host_scheduler", hostSchedulerPy},
	{"host_run", hostRunPy},
	{"host_feed", hostFeedPy},
	{"host_perf", hostPerfPy},
	{"host_spans", hostSpansPy},
}

// HostConfig configures the host.
type HostConfig struct {
	Python string   // the interpreter (the helpers'); default "python3"
	Env    []string // appended to the inherited environment
	Dir    string
	Log    zerolog.Logger
	// StartTimeout bounds a start, imports included (default 2 min).
	StartTimeout time.Duration
	// Limits bound what the host sends (default protocol.DefaultLimits).
	Limits protocol.Limits
	// StopGrace is how long Close lets the host finish (default 5 s).
	StopGrace time.Duration
	// Modules are added after the core's (hostModules); tests use it.
	Modules []pySource
}

// HostService serves one op the host calls Go for. args is the request
// without its envelope; the result is answered as "result" (any value
// protocol.Encode takes), an error as "error" (its text), which the host
// raises as host.GoError. Services run on a goroutine of their own, never
// under the engine's lock; ctx ends with the host.
type HostService func(ctx context.Context, args *protocol.Map) (any, error)

// Host is the scheduler-side Python host. Its methods are safe for
// concurrent use.
type Host struct {
	sup       supervisor
	log       zerolog.Logger
	stopGrace time.Duration

	mu        sync.RWMutex
	services  map[string]HostService
	exitHooks []func(pid int, status string)

	forwarded atomic.Pointer[map[string]bool] // ops in dask_scheduler.handlers
	streamOps atomic.Pointer[map[string]bool] // ops in dask_scheduler.stream_handlers

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // service goroutines
}

// NewHost prepares a host; no process starts until it is needed.
func NewHost(cfg HostConfig) *Host {
	if cfg.Python == "" {
		cfg.Python = "python3"
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 2 * time.Minute
	}
	if cfg.Limits.MaxFrames == 0 {
		cfg.Limits = protocol.DefaultLimits
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = exitGrace
	}
	h := &Host{log: cfg.Log.With().Str("component", "host").Logger(), stopGrace: cfg.StopGrace,
		services: map[string]HostService{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	mods := slices.Concat(hostModules, cfg.Modules, []pySource{{"__main__", "import host\nhost.main()\n"}})
	limits := cfg.Limits
	h.sup = supervisor{
		spec: procSpec{What: "scheduler-side Python host", PIDField: "host_pid", Python: cfg.Python,
			Env: cfg.Env, Dir: cfg.Dir, Sources: mods, Log: h.log},
		startTimeout: cfg.StartTimeout,
		open: func(p *proc) (session, error) {
			if err := hello(p, limits, hostWireVersion); err != nil {
				return nil, err
			}
			return &hostSession{pipe: newMsgPipe(p, pipeHandlers{request: h.serveRequest, message: h.serveMessage}, limits)}, nil
		},
		onExit: func(pid int, status string, _ bool) { h.exited(pid, status) },
	}
	return h
}

// Start starts the host now if it is not running (a preload needs it from
// the start).
func (h *Host) Start(ctx context.Context) error {
	_, err := h.sup.get(ctx)
	return err
}

// Call sends op to the host, starting it if needed, and returns its answer
// (the dict, "status" "OK" or "error" with distributed's error_message
// fields). An error means no answer came: the host could not start, died
// (the error names its exit status), or ctx ended.
func (h *Host) Call(ctx context.Context, op string, body *protocol.Map) (*protocol.Map, error) {
	r, err := h.sup.get(ctx)
	if err != nil {
		return nil, err
	}
	ans, err := pipeOf(r).call(ctx, op, body)
	if err != nil {
		return nil, err
	}
	ans.Delete("t")
	ans.Delete("id")
	return ans, nil
}

// Post sends a one-way message to the host if it is running (events flow
// only while something there listens); false if there is no host or the
// message was dropped because maxPosts were queued.
func (h *Host) Post(op string, body *protocol.Map) bool {
	r := h.sup.current()
	if r == nil {
		return false
	}
	return pipeOf(r).post(op, body)
}

// Serve makes op a service the host can call (host.call_go(op, ...)) or
// post to (host.post_go(op, ...); the result is then dropped and an error
// logged).
func (h *Host) Serve(op string, fn HostService) {
	h.mu.Lock()
	h.services[op] = fn
	h.mu.Unlock()
}

// OnExit registers fn to run when a started host exits other than by
// Close, with its pid and exit status: the layer that kept state there
// (plugins) logs what was lost.
func (h *Host) OnExit(fn func(pid int, status string)) {
	h.mu.Lock()
	h.exitHooks = append(h.exitHooks, fn)
	h.mu.Unlock()
}

// Forwards reports whether the running host serves op through
// dask_scheduler.handlers (a forwarded op).
func (h *Host) Forwards(op string) bool {
	m := h.forwarded.Load()
	return m != nil && (*m)[op]
}

// ForwardsStream reports whether the host serves stream op through
// dask_scheduler.stream_handlers.
func (h *Host) ForwardsStream(op string) bool {
	m := h.streamOps.Load()
	return m != nil && (*m)[op]
}

// PID is the running host's pid, or 0.
func (h *Host) PID() int {
	if r := h.sup.current(); r != nil {
		return r.p.pid
	}
	return 0
}

// Inflight is the number of calls waiting for the host's answer.
func (h *Host) Inflight() int {
	if r := h.sup.current(); r != nil {
		return pipeOf(r).inflight()
	}
	return 0
}

// Close stops the host and waits for its goroutines. Idempotent.
func (h *Host) Close() {
	h.cancel()
	h.sup.close(h.stopGrace)
	h.wg.Wait()
}

// hostSession is the host's side of one host process: its pipe, whose
// writer runs beside the reader and is joined when the process is gone.
type hostSession struct {
	pipe *msgPipe
	wg   sync.WaitGroup
}

func (hs *hostSession) run() {
	hs.wg.Add(1)
	go func() {
		defer hs.wg.Done()
		hs.pipe.writeLoop()
	}()
	hs.pipe.readLoop()
}

func (hs *hostSession) end(status string) bool {
	hs.pipe.close(&errProcGone{What: hs.pipe.p.spec.What, Status: status})
	hs.wg.Wait()
	return false
}

func pipeOf(r *running) *msgPipe { return r.sess.(*hostSession).pipe }

func (h *Host) exited(pid int, status string) {
	h.forwarded.Store(nil)
	h.streamOps.Store(nil)
	h.log.Error().Int("host_pid", pid).Str("status", status).
		Msg("scheduler-side Python host exited; requests in flight failed, the next one starts a new host")
	h.mu.RLock()
	hooks := slices.Clone(h.exitHooks)
	h.mu.RUnlock()
	for _, fn := range hooks {
		fn(pid, status)
	}
}

// serveRequest runs a service for the host on a goroutine of its own.
func (h *Host) serveRequest(op string, msg *protocol.Map, reply func(*protocol.Map)) {
	h.mu.RLock()
	fn := h.services[op]
	h.mu.RUnlock()
	if fn == nil {
		reply(protocol.NewMap("status", "error", "error", fmt.Sprintf("the scheduler offers the host no %q", op)))
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		res, err := fn(h.ctx, stripEnvelope(msg))
		if err != nil {
			reply(protocol.NewMap("status", "error", "error", err.Error()))
			return
		}
		reply(protocol.NewMap("status", "OK", "result", res))
	}()
}

// serveMessage takes the host's one-way messages: which ops it handles
// ("handlers"), or a post to a service.
func (h *Host) serveMessage(op string, msg *protocol.Map) {
	if op == "handlers" {
		ops, _ := msg.Get("ops").([]any)
		set := make(map[string]bool, len(ops))
		for _, o := range ops {
			if s, ok := o.(string); ok {
				set[s] = true
			}
		}
		if kind, _ := msg.Get("kind").(string); kind == "stream_handlers" {
			h.streamOps.Store(&set)
		} else {
			h.forwarded.Store(&set)
		}
		return
	}
	h.mu.RLock()
	fn := h.services[op]
	h.mu.RUnlock()
	if fn == nil {
		h.log.Warn().Str("op", op).Msg("host posted a message nothing serves")
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if _, err := fn(h.ctx, stripEnvelope(msg)); err != nil {
			h.log.Warn().Err(err).Str("op", op).Msg("host message failed")
		}
	}()
}

func stripEnvelope(m *protocol.Map) *protocol.Map {
	out := &protocol.Map{Entries: make([]protocol.Entry, 0, len(m.Entries))}
	for _, e := range m.Entries {
		if k, _ := e.Key.(string); k != "t" && k != "id" && k != "op" {
			out.Entries = append(out.Entries, e)
		}
	}
	return out
}
