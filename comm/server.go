package comm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"daskgo/protocol"
)

// DefaultIdleTimeout closes RPC connections that carry no request for this
// long. distributed's ConnectionPool keeps comms idle indefinitely and
// notices a peer's close through tornado's close callback, so the timeout
// only has to reap the truly forgotten: it is long on purpose. TCP keepalive
// notices dead peers much sooner.
const DefaultIdleTimeout = time.Hour

// Server serves RPC requests on connections from Listeners, like
// distributed.core.Server, with net/http's lifecycle: Serve blocks until the
// listener fails or Shutdown is called; Shutdown stops accepting, closes idle
// connections, waits for requests in flight and stream handlers to return.
// Fields must be set before Serve and not changed afterwards.
type Server struct {
	Handlers map[string]Handler
	// LazyHandlers serve their ops from the undecoded frame (Request.Raw;
	// lazyrequest.go) where the request is a plain one-frame dict, and
	// decoded (Raw nil) otherwise. An op is in Handlers or here, not both.
	LazyHandlers map[string]Handler
	// Fallback, when set, is asked for the handler of an op that is in
	// neither map (nil: none): ops that another process registers at run
	// time, such as the handlers a scheduler plugin adds. It must not block.
	Fallback func(op string) Handler
	// Options, when set, replace the Listener's options for the handshake
	// and read limits of accepted connections (keepalive is the Listener's).
	Options *Options
	// IdleTimeout: 0 means DefaultIdleTimeout, negative means never. It does
	// not apply to connections taken over by a stream handler.
	IdleTimeout time.Duration
	// Name appears in error replies ("dask-go-scheduler has no handler …").
	Name string
	// Logger receives connection-level events; the zero Logger discards.
	Logger zerolog.Logger

	initOnce  sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
	mu        sync.Mutex
	listeners map[Listener]struct{}
	conns     map[*serverConn]struct{}
	shutdown  bool
	empty     chan struct{} // closed and replaced when conns becomes empty
}

type serverConn struct {
	c    *Conn
	idle atomic.Bool // blocked reading the next request, no request in flight
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.ctx, s.cancel = context.WithCancel(context.Background())
		s.listeners = map[Listener]struct{}{}
		s.conns = map[*serverConn]struct{}{}
		s.empty = make(chan struct{})
	})
}

// Serve accepts connections on l and serves each in its own goroutine. It
// always returns a non-nil error; after Shutdown, ErrServerClosed. l is
// closed when Serve returns.
func (s *Server) Serve(l Listener) error {
	s.init()
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.shuttingDown() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// EMFILE and friends: back off as net/http does instead of spinning.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.Logger.Warn().Err(err).Dur("retry_in", backoff).Msg("accept failed")
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
			}
			continue
		}
		backoff = 0
		if s.Options != nil { // nothing has been read yet, so limits can still change
			c.opts, c.limits = s.Options, s.Options.limits()
		}
		sc := &serverConn{c: c}
		if !s.track(sc) {
			c.Close()
			return ErrServerClosed
		}
		go s.serveConn(sc)
	}
}

func (s *Server) track(sc *serverConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return false
	}
	s.conns[sc] = struct{}{}
	return true
}

func (s *Server) untrack(sc *serverConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, sc)
	if len(s.conns) == 0 {
		close(s.empty)
		s.empty = make(chan struct{})
	}
}

func (s *Server) shuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutdown
}

// Shutdown stops the listeners, cancels the context of running handlers,
// closes idle connections and waits until every connection has finished. If
// ctx ends first, the remaining connections are closed and ctx's error is
// returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.mu.Lock()
	s.shutdown = true
	for l := range s.listeners {
		l.Close()
	}
	s.mu.Unlock()
	s.cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		n, empty := len(s.conns), s.empty
		for sc := range s.conns {
			if sc.idle.Load() {
				sc.c.Close()
			}
		}
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-empty:
		case <-tick.C: // a busy connection may have gone idle
		case <-ctx.Done():
			s.closeAll()
			return ctx.Err()
		}
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sc := range s.conns {
		sc.c.Close()
	}
}

// serveConn is distributed's Server._handle_comm for one connection.
func (s *Server) serveConn(sc *serverConn) {
	c := sc.c
	log := s.Logger.With().Str("peer", c.Peer()).Logger()
	defer func() {
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Bytes("stack", debug.Stack()).Msg("bug: panic while serving connection; closing it")
		}
		c.Close()
		s.untrack(sc)
	}()
	if err := c.Handshake(s.ctx); err != nil {
		logHandshakeError(log, err)
		return
	}
	log.Debug().Msg("connection established")
	for {
		req, ok := s.readRequest(sc, log)
		if !ok || !s.dispatch(req, log) {
			return
		}
	}
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout == 0 {
		return DefaultIdleTimeout
	}
	return s.IdleTimeout
}

// readRequest waits for the next request. It returns false when the
// connection must close: the peer left, timed out, or sent something that
// is not a request (then an error reply is attempted when one is expected).
func (s *Server) readRequest(sc *serverConn, log zerolog.Logger) (*Request, bool) {
	c := sc.c
	sc.idle.Store(true)
	if s.shuttingDown() {
		return nil, false
	}
	if t := s.idleTimeout(); t > 0 {
		_ = c.SetReadDeadline(time.Now().Add(t))
	}
	frames, err := c.ReadFrames()
	sc.idle.Store(false)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		logReadError(log, err, "unreadable message; closing connection")
		return nil, false
	}
	if len(frames) == 1 && s.LazyHandlers != nil && !c.Tracing() {
		if req, ok := s.lazyRequest(frames[0]); ok {
			req.Conn, req.Log = c, log
			return req, true
		}
	}
	msg, err := protocol.Decode(frames)
	if err != nil {
		log.Warn().Err(err).Msg("undecodable request; closing connection")
		s.replyError(c, log, err)
		return nil, false
	}
	c.trace('r', msg, frames)
	req, err := parseRequest(msg)
	if err != nil {
		log.Warn().Err(err).Msg("bad request; closing connection")
		if req == nil || req.Reply {
			s.replyError(c, log, err)
		}
		return nil, false
	}
	req.Conn, req.Log = c, log
	return req, true
}

// logReadError keeps ordinary hang-ups and idle reaping at debug level and
// protocol violations at warn.
// logHandshakeError: a peer refused at the handshake (a TLS failure, a
// handshake never completed within the connect timeout, bytes that are
// not a handshake) is worth a warning with its address; a peer that only
// connected and left (a TCP probe) is not.
func logHandshakeError(log zerolog.Logger, err error) {
	if errors.Is(err, ErrClosed) || errors.Is(err, io.EOF) {
		log.Debug().Err(err).Msg("peer left before the handshake")
		return
	}
	log.Warn().Err(err).Msg("handshake failed; connection refused")
}

func logReadError(log zerolog.Logger, err error, msg string) {
	var ne net.Error
	switch {
	case errors.Is(err, ErrClosed):
		log.Debug().Err(err).Msg("connection closed")
	case errors.As(err, &ne) && ne.Timeout():
		log.Debug().Err(err).Msg("connection idle or stalled; closing it")
	default:
		log.Warn().Err(err).Msg(msg)
	}
}

// dispatch runs one request and writes its reply; false closes the connection.
func (s *Server) dispatch(req *Request, log zerolog.Logger) bool {
	c := req.Conn
	if req.Op == "close" {
		if req.Reply {
			_ = c.Write("OK")
		}
		return false
	}
	h := s.Handlers[req.Op]
	if lazy := s.LazyHandlers[req.Op]; lazy != nil {
		h = lazy
	}
	if h == nil && s.Fallback != nil {
		h = s.Fallback(req.Op)
	}
	if h == nil {
		err := fmt.Errorf("unsupported operation %q: %s has no handler for it", req.Op, s.name())
		log.Warn().Str("op", req.Op).Msg("no handler for op")
		if req.Reply {
			return s.replyError(c, log, err)
		}
		return true
	}
	result, err, panicked := s.call(h, req, log)
	if req.takenOver {
		return false
	}
	if err != nil {
		log.Warn().Err(err).Str("op", req.Op).Msg("handler failed")
		result = ErrorMessage(err)
	}
	if req.Reply && !req.skipReply {
		if werr := c.Write(result); werr != nil {
			if c.Closed() {
				log.Debug().Err(werr).Str("op", req.Op).Msg("lost connection while replying")
				return false
			}
			log.Error().Err(werr).Str("op", req.Op).Msg("bug: handler returned an unencodable reply")
			return s.replyError(c, log, fmt.Errorf("op %q: %w", req.Op, werr))
		}
	}
	return !panicked && !req.Close && !s.shuttingDown()
}

// call runs a handler, turning a panic into an error reply: the handler's
// state may be broken, so the connection is closed afterwards.
func (s *Server) call(h Handler, req *Request, log zerolog.Logger) (result any, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Str("op", req.Op).Bytes("stack", debug.Stack()).Msg("bug: handler panicked")
			result, err, panicked = nil, fmt.Errorf("internal error in %s handling op %q: %v", s.name(), req.Op, r), true
		}
	}()
	result, err = h(s.ctx, req)
	return result, err, false
}

// replyError writes distributed's uncaught-error dict; false if that failed.
func (s *Server) replyError(c *Conn, log zerolog.Logger, err error) bool {
	if werr := c.Write(ErrorMessage(err)); werr != nil {
		log.Debug().Err(werr).Msg("could not send error reply")
		return false
	}
	return true
}

func (s *Server) name() string {
	if s.Name == "" {
		return "server"
	}
	return s.Name
}
