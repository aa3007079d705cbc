package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"daskgo/comm"
	"daskgo/compat"
	"daskgo/protocol"
	"daskgo/scheduler"
	"daskgo/scheduler/server/web"
)

// Config is everything the outer ring needs; cmd/dask-go-scheduler fills it
// from flags and dask config files.
type Config struct {
	Listen string // e.g. "tcp://127.0.0.1:8786"; port 0 picks a free one
	Engine scheduler.Config
	Python string // interpreter for the materializer helper
	// TaskOrdering and CheckOrder configure the helper (compat.Config's
	// Ordering and CheckOrder).
	TaskOrdering string
	CheckOrder   bool
	// HashSeed is the PYTHONHASHSEED dask.order's priorities are computed
	// under (compat.Config.HashSeed).
	HashSeed uint32
	// Preload are the modules the Python host runs at start, with
	// PreloadArgv their click command's arguments (distributed.preloading):
	// a module that fails to import or rejects its arguments fails Start.
	Preload, PreloadArgv []string
	Compression          string // distributed.comm.compression ("" or "lz4")
	TickEvery            time.Duration
	Logger               zerolog.Logger
	// IdleTimeout closes the scheduler once idle that long (--idle-timeout,
	// distributed.scheduler.idle-timeout). Its default, 0, is never, and
	// so is scheduler.Never, the value compat reads dask's null as.
	IdleTimeout time.Duration
	// ConnectionLimit bounds the pool of connections to workers and
	// nannies (comm.PoolConfig.Limit; 0: half the fd limit).
	ConnectionLimit int
	// Clock is the time source (default: the wall clock; clock.go).
	Clock Clock
	// TLS is the scheduler role's TLS configuration for tls:// listening
	// and dialing (nil: none); RequireEncryption refuses tcp:// both ways
	// (distributed.comm.require-encryption).
	TLS               *comm.TLSConfig
	RequireEncryption bool
	// ConnectTimeout bounds a connection's dial and handshakes, TLS's
	// included (distributed.comm.timeouts.connect); TCPTimeout is
	// distributed.comm.timeouts.tcp. Zero: distributed's 30 s.
	ConnectTimeout, TCPTimeout time.Duration
	// Dashboard is the HTTP server on the dashboard address (package
	// web); an empty Dashboard.Addr turns it off. The port it binds is the
	// one identity announces under services["dashboard"], which stock
	// clients read for Client.dashboard_link.
	Dashboard DashboardConfig
}

// DashboardConfig configures the HTTP server.
type DashboardConfig struct {
	Addr   string // host:port; port 0 picks one; "" for none
	Prefix string // --dashboard-prefix
	// NoPages leaves the dashboard's pages out (--no-dashboard); the
	// routes still answer, as distributed's do without Bokeh's apps.
	NoPages bool
	// TLS serves HTTPS (distributed.scheduler.dashboard.tls.*; nil: HTTP).
	TLS *tls.Config
	// Routes is distributed.scheduler.http.routes (nil: the defaults).
	Routes  []string
	Version string
	// TaskStreamLength is how many task runs the task stream keeps
	// (distributed.scheduler.dashboard.status.task-stream-length).
	TaskStreamLength int
}

// Server is the scheduler process: the RPC server, the streams of clients
// and workers, the materializer helper, and the engine's loop (loop.go),
// which the goroutines doc.go lists enter one at a time under its lock
// ("The engine's lock"). Lifecycle: Start, then Addr, then Shutdown.
type Server struct {
	cfg  Config
	log  zerolog.Logger
	rpc  *comm.Server
	lis  comm.Listener
	pool *comm.Pool
	mat  *compat.HelperPool
	host *compat.Host // the scheduler-side Python host; no process until needed (host.go)
	// localDir is the scheduler's local directory (compat.MakeLocalDirectory),
	// where uploaded files go; "" when it could not be made
	localDir string
	loop     *loop

	mu      sync.Mutex // guards workers and clients: the open streams by address / client id
	workers map[string]*comm.BatchedSend
	clients map[string]*comm.BatchedSend

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	serveErr chan error
	started  time.Time
	rng      *rand.Rand
	rngMu    sync.Mutex // guards rng (scatter's and gather's random worker choices)
	scatters uint64     // round-robin counter of scatter_to_workers
	logRing  *logRing
	memory   *memoryReturner
	// replicaMu makes replicate and rebalance mutually exclusive
	// (Scheduler._replica_lock).
	replicaMu sync.Mutex
	tracing   bool // --log-level trace: the round-trip profile's events (trace.go)
	clock     Clock
	web       *web.Server // nil without a dashboard

	statusSubs statusSubscribers // subscribe_worker_status streams (membership.go)
	counters   counters
	sysmon     sysMonitor       // the system monitor (sysmon.go), started on first read
	splugins   schedulerPlugins // the host's scheduler plugins and their hook queue (scheduler_plugins.go)
	snap       snapshots        // the engine's view for the HTTP routes (web.go)
	idleOnce   sync.Once        // the idle timeout's shutdown
	// drain is how long a stream the scheduler drops may take to write
	// what it queued before its connection is closed (streamDrain; tests
	// lengthen it).
	drain time.Duration
}

// Start listens, starts the materializer and the engine loop, and serves.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.TickEvery == 0 {
		cfg.TickEvery = 500 * time.Millisecond
	}
	if cfg.Clock == nil {
		cfg.Clock = wallClock{}
	}
	ring := newLogRing(logLength, cfg.Clock)
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger.Hook(ring),
		logRing:  ring,
		workers:  map[string]*comm.BatchedSend{},
		clients:  map[string]*comm.BatchedSend{},
		serveErr: make(chan error, 1),
		started:  cfg.Clock.Now(),
		rng:      rand.New(rand.NewPCG(uint64(cfg.Clock.Now().UnixNano()), 1)),
		memory:   newMemoryReturner(cfg.Clock),
		clock:    cfg.Clock,
		drain:    streamDrain,
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	trace := messageTrace(s.log)
	s.tracing = trace != nil
	opts := &comm.Options{Compression: cfg.Compression, Trace: trace, TLS: cfg.TLS, RequireEncryption: cfg.RequireEncryption,
		HandshakeTimeout: cfg.ConnectTimeout, TCPTimeout: cfg.TCPTimeout}
	lis, err := comm.Listen(ctx, cfg.Listen, opts)
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	s.lis = lis
	dialOpts := *opts
	dialOpts.PickleProtocol = 4 // as Scheduler's handshake_overrides announce to workers
	s.pool = comm.NewPool(comm.PoolConfig{Options: &dialOpts,
		Limit: cfg.ConnectionLimit})

	var pyEnv []string // what the helpers and the host are told
	if s.localDir, err = compat.MakeLocalDirectory(); err != nil {
		s.log.Warn().Err(err).Msg("no local directory: upload_file to the scheduler will fail")
	} else {
		pyEnv = append(pyEnv, compat.LocalDirectoryEnv(s.localDir))
	}
	results := make(chan scheduler.Stimulus, 64)
	s.mat, err = compat.StartPool(ctx, compat.Config{Python: cfg.Python, Log: s.log, Results: results, Env: pyEnv,
		Ordering: cfg.TaskOrdering, CheckOrder: cfg.CheckOrder, HashSeed: cfg.HashSeed})
	if err != nil {
		lis.Close()
		s.pool.Close()
		s.removeLocalDir()
		s.cancel()
		return nil, fmt.Errorf("start the graph materializer: %w", err)
	}

	ecfg := cfg.Engine
	ecfg.SchedulerAddress = comm.ContactAddress(lis.Addr())
	ecfg.SchedulerID = "Scheduler-" + newUUID()
	ecfg.StartedAt = s.started
	if cfg.Dashboard.Addr != "" {
		s.web, err = web.Listen(web.Config{Addr: cfg.Dashboard.Addr, Prefix: cfg.Dashboard.Prefix, Routes: cfg.Dashboard.Routes, NoPages: cfg.Dashboard.NoPages, TLS: cfg.Dashboard.TLS,
			Backend: webBackend{s}, Log: s.log, Version: cfg.Dashboard.Version})
		if err != nil {
			lis.Close()
			s.pool.Close()
			s.mat.Close()
			s.removeLocalDir()
			s.cancel()
			return nil, err
		}
		// served from the end of Start, once the loop exists: a request
		// before that would find no engine
		ecfg.Services = protocol.NewMap("dashboard", int64(s.web.Port()))
		ecfg.DashboardStreamLength = cfg.Dashboard.TaskStreamLength
		if ecfg.DashboardStreamLength <= 0 {
			ecfg.DashboardStreamLength = 1000 // distributed.yaml's
		}
	} else {
		ecfg.Services = protocol.NewMap()
	}
	engine := scheduler.New(ecfg)
	ec := engine.Config() // read before any goroutine may hold the engine's lock
	s.loop = newLoop(s, engine)

	s.startHost(pyEnv)
	s.startSchedulerPlugins()
	s.rpc = &comm.Server{Handlers: s.handlers(), Options: opts, Name: "dask-go-scheduler", Logger: s.log,
		LazyHandlers: s.rawHandlers(), Fallback: s.forwardedOp}
	s.goRun(s.loop.run)
	s.goRun(func() { s.forwardResults(results) })
	s.goRun(func() { s.periodic(s.cfg.TickEvery, tickAt) })
	if !ec.NoWorkStealing {
		s.goRun(func() { s.periodic(ec.WorkStealingInterval, stealTickAt) })
	}
	if !ec.NoAMMPolicy { // AMMTick runs it while started (amm_handler)
		s.goRun(func() { s.periodic(ec.ActiveMemoryManagerInterval, ammTickAt) })
	}
	s.goRun(func() { s.memory.run(s) })
	if s.web != nil {
		s.web.Serve()
	}
	go func() { s.serveErr <- s.rpc.Serve(lis) }()
	if err := s.runPreloads(ctx); err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
		return nil, err
	}
	return s, nil
}

// goRun starts a goroutine owned by the server: Shutdown waits for it.
func (s *Server) goRun(fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

// Addr is the address clients and workers connect to.
func (s *Server) Addr() string { return comm.ContactAddress(s.lis.Addr()) }

// DashboardPort is the port the HTTP server bound (0 without one).
func (s *Server) DashboardPort() int {
	if s.web == nil {
		return 0
	}
	return s.web.Port()
}

// Started is when the scheduler started.
func (s *Server) Started() time.Time { return s.started }

// Done is closed when the server stops serving (Shutdown, terminate, or a
// listener failure).
func (s *Server) Done() <-chan struct{} { return s.ctx.Done() }

// Shutdown tells workers to close (as distributed's Scheduler.close does),
// closes client streams, stops serving and waits for every goroutine.
// Streams are taken out under Server.mu and shut outside it, all at once:
// a peer that stopped reading costs its own drain deadline, not everyone's.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	workers, clients := s.workers, s.clients
	s.workers, s.clients = map[string]*comm.BatchedSend{}, map[string]*comm.BatchedSend{}
	s.mu.Unlock()
	var streams []*comm.BatchedSend
	for _, b := range workers {
		_ = b.Send(protocol.NewMap("op", "close", "reason", "scheduler-close"))
		streams = append(streams, b)
	}
	for _, b := range clients {
		_ = b.Send(protocol.NewMap("op", "stream-closed"))
		streams = append(streams, b)
	}
	drain := s.drain
	if d, ok := ctx.Deadline(); ok {
		drain = min(drain, time.Until(d))
	}
	for _, b := range streams {
		b.Shut(drain)
	}
	for _, b := range streams {
		select {
		case <-b.Done():
		case <-ctx.Done():
		}
	}
	if s.web != nil {
		_ = s.web.Shutdown(ctx)
	}
	s.cancel()
	err := s.rpc.Shutdown(ctx)
	if errors.Is(err, comm.ErrServerClosed) {
		err = nil
	}
	s.mat.Close()
	s.host.Close()
	s.pool.Close()
	s.removeLocalDir() // after the processes that write there have stopped
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("shutdown: %w", ctx.Err())
	}
	return err
}

// periodic submits stim(now) to the engine every interval until the
// server stops: the clock for time-based rules (Tick: worker-ttl, leases)
// and work stealing's StealTick, as distributed's PeriodicCallbacks.
func (s *Server) periodic(every time.Duration, stim func(now time.Time) scheduler.Stimulus) {
	t := s.clock.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C():
			s.loop.submit(stim(now))
		}
	}
}

func tickAt(now time.Time) scheduler.Stimulus {
	return &scheduler.Tick{Base: stimulusBase("", "tick", now)}
}

func ammTickAt(now time.Time) scheduler.Stimulus {
	return &scheduler.AMMTick{Base: stimulusBase("", "active_memory_manager", now)}
}

func stealTickAt(now time.Time) scheduler.Stimulus {
	return &scheduler.StealTick{Base: stimulusBase("", "steal-balance", now)}
}

// forwardResults passes materializer results (GraphMaterialized,
// ShuffleRunCreated) to the engine.
func (s *Server) forwardResults(results <-chan scheduler.Stimulus) {
	for {
		select {
		case <-s.ctx.Done():
			return
		case st := <-results:
			collectBeforeBigGraph(st)
			s.loop.submit(st)
		}
	}
}

// streamFor returns the batched stream of a worker or client, or nil.
func (s *Server) workerStream(addr string) *comm.BatchedSend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workers[addr]
}

func (s *Server) clientStream(id string) *comm.BatchedSend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[id]
}

func newUUID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// IdentityJSON is Scheduler.identity() as encoding/json writes it, as
// distributed writes the scheduler file and json/identity.json.
func (s *Server) IdentityJSON(ctx context.Context) (any, error) {
	var out *protocol.Map
	if err := s.loop.query(ctx, func(st *scheduler.State) { out = st.Identity(-1) }); err != nil {
		return nil, err
	}
	return jsonValue(out), nil
}

// removeLocalDir removes the local directory and what was uploaded to it,
// as distributed's Server releases its work directory when it closes.
func (s *Server) removeLocalDir() {
	if s.localDir == "" {
		return
	}
	if err := os.RemoveAll(s.localDir); err != nil {
		s.log.Warn().Err(err).Str("dir", s.localDir).Msg("cannot remove the scheduler's local directory")
	}
}
