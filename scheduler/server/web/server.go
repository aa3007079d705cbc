package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"daskgo/scheduler"
)

// Backend is what the routes need of the scheduler. Snapshot is an atomic
// load of the engine's last published view; the other methods each make
// one request to the engine, as the RPCs of the same names do.
type Backend interface {
	// Snapshot is the latest view (never nil once the server runs).
	Snapshot() *scheduler.Snapshot
	// Identity is Scheduler.identity() as a JSON-encodable value.
	Identity(ctx context.Context) (any, error)
	// Counts is json/counts.json's dict, computed on the engine as
	// distributed computes it (O(tasks), per request, as there).
	Counts(ctx context.Context) (map[string]int64, error)
	// Workers are the workers now, by name and address (get_workers,
	// which the operator reads right after a worker joins: not the
	// snapshot, which may be a tick old).
	Workers(ctx context.Context) ([]NamedWorker, error)
	AdaptiveTarget(ctx context.Context) (int, error)
	WorkersToClose(ctx context.Context, n int) ([]string, error)
	// RetireWorkers retires workers (addresses) gracefully and returns
	// {address: identity} of those retired.
	RetireWorkers(ctx context.Context, workers []string) (map[string]any, error)
	// CheckIdle is Scheduler.check_idle: when the scheduler became idle
	// (unix seconds), or nil when busy.
	CheckIdle(ctx context.Context) (*float64, error)
	// Process is what /metrics reports of the scheduler process and its
	// helpers beyond the engine's view.
	Process() ProcessFacts
}

// NamedWorker is one entry of get_workers.
type NamedWorker struct {
	Name    any    `json:"name"` // as the worker sent it: an int stays an int
	Address string `json:"address"`
}

// ProcessFacts are the outer ring's own figures.
type ProcessFacts struct {
	ClientConnectionsAdded, ClientConnectionsRemoved int64
	WorkersAdded, WorkersRemoved                     int64
	Ticks                                            int64
	// TickMax is the longest a tick was late (or took) since the last
	// scrape; the scrape resets it (dask_scheduler_tick_duration_maximum_seconds).
	TickMax time.Duration
	// LockHeldMax is the longest the engine's lock was held since the last
	// scrape; the scrape resets it (dask_scheduler_engine_lock_held_maximum_seconds, ours).
	LockHeldMax time.Duration
	// PluginEventsQueued and PluginEventsDropped: the scheduler plugin hook
	// events waiting for the Python host, and those dropped since the start
	// because its queue was full.
	PluginEventsQueued, PluginEventsDropped int64
	// Helpers are the materializer helper processes' RSS, bytes.
	HelperRSS []int64
}

// Config configures the HTTP server.
type Config struct {
	// Addr is host:port (":8787"; port 0 picks a free one).
	Addr string
	// Prefix is --dashboard-prefix ("" or "/dask"): every route is under it.
	Prefix string
	// Routes are the route modules to serve, named as
	// distributed.scheduler.http.routes names them (route_groups.go); nil
	// means distributed's default list. The dashboard's pages are served
	// whatever the list, as distributed serves Bokeh's.
	Routes []string
	// TLS, when set, serves HTTPS (distributed.scheduler.dashboard.tls.*).
	TLS *tls.Config
	// NoPages leaves out the dashboard (pages, their data and scripts):
	// --no-dashboard.
	NoPages bool
	Backend Backend
	Log     zerolog.Logger
	// Version is the scheduler's version string for the pages.
	Version string
}

// Server serves the routes until Shutdown.
type Server struct {
	cfg  Config
	http *http.Server
	lis  net.Listener
	done chan struct{} // closed by Shutdown: ends event streams
	once sync.Once
	wg   sync.WaitGroup // Serve's goroutine
}

// Timeouts of every request but the event stream's response.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second // retire_workers waits for data to move
	idleTimeout       = 60 * time.Second
)

// Start listens on cfg.Addr and serves in a goroutine owned by the Server.
func Start(cfg Config) (*Server, error) {
	s, err := Listen(cfg)
	if err != nil {
		return nil, err
	}
	s.Serve()
	return s, nil
}

// Listen binds the address without serving yet: the scheduler learns the
// port (identity announces it) before its engine exists, and serves once
// the backend can answer.
func Listen(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("web: no backend")
	}
	cfg.Prefix = normalizePrefix(cfg.Prefix)
	groups, err := routeGroupsOf(cfg.Routes)
	if err != nil {
		return nil, err
	}
	lis, err := listen(cfg.Addr, cfg.Log)
	if err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		lis = tls.NewListener(lis, cfg.TLS)
	}
	s := &Server{cfg: cfg, lis: lis, done: make(chan struct{})}
	s.http = &http.Server{
		Handler:           s.routes(groups),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          nil,
	}
	return s, nil
}

// Serve starts serving on a goroutine that Shutdown joins.
func (s *Server) Serve() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(s.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Log.Error().Err(err).Msg("dashboard server stopped")
		}
	}()
}

// listen binds addr; when its port is taken it takes a free one on the
// same host and warns, as distributed's ServerNode.start_http_server does
// ("Port 8787 is already in use..."), so a second scheduler on a machine
// still starts.
func listen(addr string, log zerolog.Logger) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err == nil {
		return lis, nil
	}
	host, port, serr := net.SplitHostPort(addr)
	if serr != nil || port == "0" {
		return nil, fmt.Errorf("dashboard address %s: %w", addr, err)
	}
	lis, err2 := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err2 != nil {
		return nil, fmt.Errorf("dashboard address %s: %w", addr, err)
	}
	log.Warn().Str("wanted", addr).Int("port", lis.Addr().(*net.TCPAddr).Port).AnErr("cause", err).
		Msg("dashboard port is already in use; perhaps you already have a cluster running? Hosting the HTTP server on another port")
	return lis, nil
}

// Port is the port actually bound.
func (s *Server) Port() int { return s.lis.Addr().(*net.TCPAddr).Port }

// Scheme is "https" with TLS, else "http".
func (s *Server) Scheme() string {
	if s.cfg.TLS != nil {
		return "https"
	}
	return "http"
}

// Shutdown stops accepting, ends event streams and waits for requests in
// flight (up to ctx).
func (s *Server) Shutdown(ctx context.Context) error {
	s.once.Do(func() { close(s.done) })
	err := s.http.Shutdown(ctx)
	_ = s.lis.Close() // http.Server closes it only if Serve ran
	s.wg.Wait()
	return err
}

// normalizePrefix is distributed's "/" + prefix.strip("/"), without the
// trailing slash ("" for none).
func normalizePrefix(p string) string {
	p = strings.Trim(p, "/")
	if p == "" {
		return ""
	}
	return "/" + p
}
