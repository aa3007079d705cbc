package compat

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"daskgo/protocol"
	"daskgo/scheduler"
)

//go:embed materializer.py
var materializerScript string

// specPicklingScript is how the helper pickles task specs (materializer.py
// imports it; protocol/pickle/splice.go reads what it makes).
//
//go:embed spec_pickling.py
var specPicklingScript string

// ErrClosed is returned by Submit and Versions after Close.
var ErrClosed = errors.New("compat: materializer closed")

// Config configures the materializer helper.
type Config struct {
	// Python is the interpreter of the clients' environment (it unpickles
	// their graphs, so it must import their libraries). Default "python3".
	Python string
	// Env is appended to the inherited environment (KEY=VALUE entries).
	Env []string
	// Dir is the helper's working directory; empty inherits ours.
	Dir string
	// Log receives the helper's stderr and lifecycle events. The zero value
	// logs nothing.
	Log zerolog.Logger
	// Results, if set, receives the GraphMaterialized stimuli and is never
	// closed by the materializer. If nil, Start makes a buffered channel that
	// Close closes once everything has stopped.
	Results chan scheduler.Stimulus
	// ChunkTasks is how many tasks the helper puts in one response message
	// (default 10000): a bound on one message's size for huge graphs.
	ChunkTasks int
	// StartTimeout bounds a helper start, imports included (default 2 min).
	StartTimeout time.Duration
	// Limits bound the helper's responses (default protocol.DefaultLimits).
	Limits protocol.Limits
	// StopGrace is how long Close lets a busy helper finish before killing
	// it (default 5 s).
	StopGrace time.Duration
	// Now stamps the stimuli (default time.Now).
	Now func() time.Time
	// Ordering is who runs dask.order: OrderingGo (default; the Go port) or
	// OrderingPython (the helper, as distributed does; the fallback for dask
	// versions the port has not been checked against).
	Ordering string
	// CheckOrder makes the helper run dask.order.order too, and logs
	// whether Go's priorities equal it (tests; see OrderChecks).
	CheckOrder bool
	// HashSeed is the PYTHONHASHSEED both orderings use: the Go port's
	// (order.Graph.HashSeed) and the helper's, which runs under it, so that
	// either computes the same priorities and the check can compare them.
	// dask.order's priorities depend on it; Python's scheduler draws one per
	// process (HashSeedFromEnv).
	HashSeed uint32
	// RecycleAbove replaces the helper once its RSS after a graph (freed and
	// trimmed) stays this far above its start-up RSS (default 256 MiB;
	// negative: never).
	RecycleAbove int64
	// IdleRecycleAbove replaces the helper once it has been idle for
	// IdleRecycleAfter after a graph that left it this far above its
	// start-up RSS (defaults 16 MiB and 30 s; helper_recycle.go).
	IdleRecycleAbove int64
	IdleRecycleAfter time.Duration
	// MaxHelpers, SpareAfter and SpareIdle size a HelperPool: at most
	// MaxHelpers helpers (default 2); a spare starts when every helper has
	// been busy for SpareAfter with work waiting (default 200 ms) and is
	// closed after SpareIdle idle (default 30 s). helper_pool.go.
	MaxHelpers int
	SpareAfter time.Duration
	SpareIdle  time.Duration
}

func (c *Config) setDefaults() {
	if c.Python == "" {
		c.Python = "python3"
	}
	if c.ChunkTasks <= 0 {
		c.ChunkTasks = 10000
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 2 * time.Minute
	}
	if c.Limits.MaxFrames == 0 {
		c.Limits = protocol.DefaultLimits
	}
	if c.StopGrace <= 0 {
		c.StopGrace = exitGrace
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Ordering == "" {
		c.Ordering = OrderingGo
	}
	if c.RecycleAbove == 0 {
		c.RecycleAbove = 256 << 20
	}
	if c.IdleRecycleAbove == 0 {
		c.IdleRecycleAbove = 16 << 20
	}
	if c.IdleRecycleAfter == 0 {
		c.IdleRecycleAfter = 30 * time.Second
	}
}

const (
	exitGrace   = 5 * time.Second // from stdout EOF to SIGKILL
	resultsSize = 64
)

// Materializer runs the Python graph materializer helper (see doc.go).
// Submit, Versions, PID and Close are safe for concurrent use.
type Materializer struct {
	cfg     Config
	log     zerolog.Logger
	results chan scheduler.Stimulus
	ownsOut bool

	// sup runs the helper process (proc_supervise.go): eager, it starts
	// the next helper as soon as one exits; the session is the
	// incarnation (materializer_proc.go)
	sup supervisor

	mu       sync.Mutex
	queue    []*job        // submitted, not yet taken by a writer
	wake     chan struct{} // cap 1: the queue grew
	cur      *incarnation  // the running helper, nil between restarts
	versions *protocol.Map // from the last successful start
	plugins  *protocol.Map // worker plugins, from the last successful start
	closed   bool
	nextWire int64

	orderChecks, orderCheckedTasks, orderMismatches int64
	recycled                                        int64 // helpers replaced for their memory
	answers                                         int64 // graph answers, for the idle recycle
	idleTimer                                       *time.Timer

	done chan struct{} // closed by Close
}

// job is one request on its way through a helper.
type job struct {
	wireID   int64
	req      scheduler.HelperRequest
	versions chan versionsReply           // non-nil for a versions request
	shuffle  *scheduler.ShuffleRunRequest // non-nil for a shuffle_run request
	feed     *feedJob                     // non-nil for a feed_setup request (helper_feed.go)
	graph    *graphBuilder                // the materialize answer so far
	bad      error                        // first malformed chunk, reported when the answer is done
}

type versionsReply struct {
	m   *protocol.Map
	err error
}

// Start launches the helper and waits until it has imported dask and
// distributed and answered a versions request (bounded by ctx and
// cfg.StartTimeout). Later restarts happen in the background.
func Start(ctx context.Context, cfg Config) (*Materializer, error) {
	cfg.setDefaults()
	if cfg.Ordering != OrderingGo && cfg.Ordering != OrderingPython {
		return nil, fmt.Errorf("materializer: ordering %q is not %q or %q", cfg.Ordering, OrderingGo, OrderingPython)
	}
	m := &Materializer{
		cfg:     cfg,
		log:     cfg.Log.With().Str("component", "materializer").Logger(),
		results: cfg.Results,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	if m.results == nil {
		m.results = make(chan scheduler.Stimulus, resultsSize)
		m.ownsOut = true
	}
	m.sup = supervisor{spec: m.procSpec(), startTimeout: cfg.StartTimeout, open: m.open,
		eager: true, onExit: m.exited, onStartFailed: m.failQueued}
	if _, err := m.sup.get(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Results is where GraphMaterialized stimuli arrive, one per Submit, in
// submission order.
func (m *Materializer) Results() <-chan scheduler.Stimulus { return m.results }

// Submit queues req for materialization and returns at once.
func (m *Materializer) Submit(req scheduler.HelperRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.enqueueLocked(&job{req: req})
	return nil
}

func (m *Materializer) enqueueLocked(j *job) {
	m.nextWire++
	j.wireID = m.nextWire
	m.queue = append(m.queue, j)
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Versions returns distributed.versions.get_versions() as the helper reports
// it, for the identity and versions RPCs. The map is shared: do not modify.
func (m *Materializer) Versions(ctx context.Context) (*protocol.Map, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if v := m.versions; v != nil {
		m.mu.Unlock()
		return v, nil
	}
	j := &job{versions: make(chan versionsReply, 1)}
	m.enqueueLocked(j)
	m.mu.Unlock()
	select {
	case r := <-j.versions:
		return r.m, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("helper versions: %w", ctx.Err())
	case <-m.done:
		return nil, ErrClosed
	}
}

// PID is the running helper's process id, or 0 between restarts.
func (m *Materializer) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil {
		return 0
	}
	return m.cur.pid
}

// Close stops the helper (EOF on its stdin; SIGKILL if it is still busy
// after StopGrace) and waits for every goroutine. Requests still queued or in flight get no
// result. Close is idempotent.
func (m *Materializer) Close() error {
	m.mu.Lock()
	first := !m.closed
	if first {
		m.closed = true
		close(m.done)
		if m.idleTimer != nil {
			m.idleTimer.Stop()
		}
		for _, j := range m.queue {
			if j.versions != nil {
				j.versions <- versionsReply{err: ErrClosed}
			}
		}
		m.queue = nil
	}
	m.mu.Unlock()
	m.sup.close(m.cfg.StopGrace)
	if first && m.ownsOut {
		close(m.results)
	}
	return nil
}

// exited logs a helper's exit; the supervisor then starts the next one.
func (m *Materializer) exited(pid int, status string, planned bool) {
	if planned {
		m.log.Info().Int("helper_pid", pid).Str("status", status).Msg("materializer helper recycled for its memory")
		return
	}
	m.log.Error().Int("helper_pid", pid).Str("status", status).Msg("materializer helper exited; restarting it")
}

func (m *Materializer) isClosed() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// failPending answers every request the dead incarnation had taken.
func (m *Materializer) failPending(inc *incarnation, status string) {
	m.mu.Lock()
	if m.cur == inc {
		m.cur = nil
	}
	pending := inc.takePending()
	m.mu.Unlock()
	for _, j := range pending {
		m.fail(j, fmt.Sprintf("materializer helper exited (%s) while materializing this graph", status))
	}
}

// failQueued answers every queued request when no helper can be started,
// so that nothing waits for a helper that may never come.
func (m *Materializer) failQueued(cause error) {
	m.mu.Lock()
	queued := m.queue
	m.queue = nil
	m.mu.Unlock()
	for _, j := range queued {
		m.fail(j, fmt.Sprintf("materializer helper unavailable: %v", cause))
	}
}

// fail answers j with an error the client (or, for a shuffle run, the
// worker) will see as a RuntimeError.
func (m *Materializer) fail(j *job, text string) {
	if j.versions != nil {
		j.versions <- versionsReply{err: errors.New(text)}
		return
	}
	if j.feed != nil {
		j.feed.answer(nil, nil, text)
		return
	}
	m.deliver(m.errorResult(j, scheduler.RuntimeErrorInfo(text)))
}

// errorResult is the failure answer of a materialize or shuffle_run job.
func (m *Materializer) errorResult(j *job, info *scheduler.ErrorInfo) scheduler.Stimulus {
	if j.shuffle != nil {
		st := m.shuffleResult(j)
		st.Err = info
		return st
	}
	st := m.result(j)
	st.Err = info
	return st
}

func (m *Materializer) result(j *job) *scheduler.GraphMaterialized {
	return &scheduler.GraphMaterialized{
		Base:      scheduler.Base{ID: fmt.Sprintf("graph-materialized-%d", j.req.ID), At: m.cfg.Now()},
		RequestID: j.req.ID,
		Client:    j.req.Client,
	}
}

// deliver hands a result to the consumer. After Close nobody may be
// reading, so it gives up then rather than block the shutdown.
func (m *Materializer) deliver(st scheduler.Stimulus) {
	select {
	case m.results <- st:
		return
	default:
	}
	select {
	case m.results <- st:
	case <-m.done:
		m.log.Debug().Msg("materializer closed; result dropped")
	}
}

// inflight counts requests handed to the running helper (for tests).
func (m *Materializer) inflight() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil {
		return 0
	}
	return len(m.cur.pending)
}
