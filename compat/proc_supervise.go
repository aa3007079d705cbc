package compat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"daskgo/protocol"
)

// The supervised-process piece, part 3: the life of one process of a kind.
// get starts it (spawn, then the kind's handshake: open) when none runs;
// one goroutine serves it (session.run) until its output ends, reaps it,
// and has the session fail every request it owed naming the exit status
// (session.end); onExit tells the layer above, which logs what was lost.
// Then either the next get starts a new one (the host: a process that is
// not needed is not started), or, eager, the serving goroutine starts one
// at once, backing off when processes die young (the graph helpers: a
// graph should not wait for imports it could have had earlier).
//
// What differs between kinds is their session: the host's is a
// request/answer pipe (proc_pipe.go, host.go), a helper's its queue of
// graphs (materializer_proc.go).
//
// Goroutines: per process, the one running serve (joined by close), and
// whatever its session starts and joins in end.

// ErrProcClosed is returned once the supervisor is closed.
var ErrProcClosed = errors.New("compat: python process closed")

// session is what a kind of process does with one started process.
type session interface {
	// run serves the process until its output ends (on the serving
	// goroutine).
	run()
	// end runs once the process is reaped: stop what run started and fail
	// every request still owed, naming status. planned: the exit was
	// asked for (a recycled helper), so no backoff applies.
	end(status string) (planned bool)
}

// Restart backoff of an eager supervisor: a process that dies within
// minUptime of its start waits before the next start, doubling up to
// maxBackoff, so a broken environment does not spin.
const (
	minUptime  = 5 * time.Second
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

type supervisor struct {
	spec         procSpec
	startTimeout time.Duration
	// open makes a session of a spawned process: the kind's handshake
	// (killed after startTimeout) and what it sets up. An error stops
	// the process; get reports it with the process's last stderr lines.
	open func(p *proc) (session, error)
	// onExit runs on the serving goroutine, after the session's end, when
	// a process exits other than by close.
	onExit func(pid int, status string, planned bool)
	// eager restarts at once after an exit instead of on the next get;
	// onStartFailed then hears of each failed start (queued work fails
	// instead of waiting for a process that may never come).
	eager         bool
	onStartFailed func(err error)

	mu       sync.Mutex
	cur      *running
	starting chan struct{} // closed when the start in progress ends
	closed   bool
	done     chan struct{} // closed by close
	wg       sync.WaitGroup
}

// running is one started process and its session.
type running struct {
	p       *proc
	sess    session
	started time.Time
	exited  chan struct{}
	status  string // set before exited closes
}

func (s *supervisor) init() {
	s.mu.Lock()
	if s.done == nil {
		s.done = make(chan struct{})
	}
	s.mu.Unlock()
}

// get returns the running process, starting one if there is none.
func (s *supervisor) get(ctx context.Context) (*running, error) {
	s.init()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrProcClosed
		}
		if s.cur != nil {
			r := s.cur
			s.mu.Unlock()
			return r, nil
		}
		if wait := s.starting; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("start the %s: %w", s.spec.What, ctx.Err())
			}
		}
		s.starting = make(chan struct{})
		s.mu.Unlock()
		r, err := s.start()
		s.mu.Lock()
		close(s.starting)
		s.starting = nil
		closed := s.closed
		if err == nil && !closed {
			s.cur = r
		}
		s.mu.Unlock()
		if err == nil && closed {
			_ = r.p.stdin.Close()
			<-r.exited
			return nil, ErrProcClosed
		}
		return r, err
	}
}

// current is the running process, or nil: for what must not start one.
func (s *supervisor) current() *running {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// start spawns a process and opens its session (bounded by
// startTimeout), then serves it on a goroutine of the supervisor's.
func (s *supervisor) start() (*running, error) {
	p, err := spawnProc(&s.spec)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	t := time.AfterFunc(s.startTimeout, func() { p.kill(fmt.Sprintf("no answer to the startup request in %s", s.startTimeout)) })
	sess, err := s.open(p)
	t.Stop()
	if err != nil {
		p.kill("startup failed")
		status := p.wait()
		return nil, fmt.Errorf("%s %q (pid %d, %s) did not start: %w%s", s.spec.What, s.spec.Python, p.pid, status, err, p.stderr.tail())
	}
	r := &running{p: p, sess: sess, started: started, exited: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.serve(r)
	}()
	s.spec.Log.Debug().Int(s.spec.PIDField, p.pid).Msgf("%s started", s.spec.What)
	return r, nil
}

// hello reads the host's first message, {"op": "hello", "wire": N}.
func hello(p *proc, lim protocol.Limits, wire int64) error {
	frames, err := protocol.ReadFrames(p.stdout, lim)
	if err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	v, err := protocol.Decode(frames)
	if err != nil {
		return fmt.Errorf("decode hello: %w", err)
	}
	m, _ := v.(*protocol.Map)
	if m == nil || m.Get("op") != "hello" {
		return fmt.Errorf("expected a hello, got %s", truncate(protocol.String(v)))
	}
	if w, _ := m.Get("wire").(int64); w != wire {
		return fmt.Errorf("it speaks wire version %s, this scheduler %d", protocol.String(m.Get("wire")), wire)
	}
	return nil
}

// serve runs r's session until the process's output ends, reaps it, ends
// the session (failing what it owed), and restarts when eager.
func (s *supervisor) serve(r *running) {
	r.sess.run()
	r.status = r.p.wait()
	s.mu.Lock()
	if s.cur == r { // a get from now on starts a new process
		s.cur = nil
	}
	s.mu.Unlock()
	planned := r.sess.end(r.status)
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	close(r.exited)
	if closed {
		s.spec.Log.Debug().Int(s.spec.PIDField, r.p.pid).Str("status", r.status).Msgf("%s stopped", s.spec.What)
		return
	}
	if s.onExit != nil {
		s.onExit(r.p.pid, r.status, planned)
	}
	if s.eager {
		s.restart(planned || time.Since(r.started) >= minUptime)
	}
}

// restart starts processes until one runs or close is called. A process
// that died young (!healthy) first waits a backoff, doubling while starts
// keep failing.
func (s *supervisor) restart(healthy bool) {
	backoff := minBackoff
	if !healthy && !s.sleep(backoff) {
		return
	}
	for {
		_, err := s.get(context.Background())
		if err == nil || errors.Is(err, ErrProcClosed) {
			return
		}
		s.spec.Log.Error().Err(err).Msgf("%s restart", s.spec.What)
		if s.onStartFailed != nil {
			s.onStartFailed(err)
		}
		backoff = min(2*backoff, maxBackoff)
		if !s.sleep(backoff) {
			return
		}
	}
}

// sleep waits d unless close comes first (then false).
func (s *supervisor) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.done:
		return false
	}
}

// close stops the process (EOF on its stdin; SIGKILL after grace) and
// joins every goroutine. Idempotent.
func (s *supervisor) close(grace time.Duration) {
	s.init()
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	r := s.cur
	wait := s.starting
	s.mu.Unlock()
	if wait != nil {
		<-wait // a start in progress sees closed and stops its process
	}
	if r != nil {
		_ = r.p.stdin.Close()
		t := time.NewTimer(grace)
		select {
		case <-r.exited:
		case <-t.C:
			r.p.kill("closed while busy")
		}
		t.Stop()
	}
	s.wg.Wait()
}
