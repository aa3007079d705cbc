package compat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"daskgo/protocol"
)

// The supervised-process piece, part 3: one process of a kind, started
// when first needed (get), watched until it exits, and started again by
// the next get after it died. When it dies every call in flight fails with
// an *errProcGone naming its exit status, and onExit says so to the layer
// above (which logs what was lost).
//
// Goroutines per running process, all joined by close: the reader (which,
// when the process's stdout ends, reaps it and fails what it owed) and the
// writer (proc_pipe.go).

// ErrProcClosed is returned once the supervisor is closed.
var ErrProcClosed = errors.New("compat: python process closed")

type supervisor struct {
	spec         procSpec
	handlers     pipeHandlers
	limits       protocol.Limits
	startTimeout time.Duration
	wire         int64 // the hello's "wire" must equal it
	// onExit runs (on the reader goroutine, after every call in flight has
	// failed) when a started process exits, with its pid and status.
	onExit func(pid int, status string)

	mu       sync.Mutex
	cur      *running
	starting chan struct{} // closed when the start in progress ends
	closed   bool
	wg       sync.WaitGroup
}

// running is one started process and its pipe.
type running struct {
	p      *proc
	pipe   *msgPipe
	exited chan struct{}
	status string // set before exited closes
}

// get returns the running process, starting one if there is none.
func (s *supervisor) get(ctx context.Context) (*running, error) {
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
		if err == nil {
			if s.closed {
				s.mu.Unlock()
				_ = r.p.stdin.Close()
				<-r.exited
				return nil, ErrProcClosed
			}
			s.cur = r
		}
		s.mu.Unlock()
		return r, err
	}
}

// current is the running process, or nil: for what must not start one.
func (s *supervisor) current() *running {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// start spawns a process and waits for its hello (bounded by
// startTimeout), then serves it.
func (s *supervisor) start() (*running, error) {
	p, err := spawnProc(&s.spec)
	if err != nil {
		return nil, err
	}
	t := time.AfterFunc(s.startTimeout, func() { p.kill(fmt.Sprintf("no hello in %s", s.startTimeout)) })
	err = s.hello(p)
	t.Stop()
	if err != nil {
		p.kill("startup failed")
		status := p.wait()
		return nil, fmt.Errorf("%s %q (pid %d, %s) did not start: %w%s", s.spec.What, s.spec.Python, p.pid, status, err, p.stderr.tail())
	}
	r := &running{p: p, pipe: newMsgPipe(p, s.handlers, s.limits), exited: make(chan struct{})}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		r.pipe.writeLoop()
	}()
	go func() {
		defer s.wg.Done()
		s.serve(r)
	}()
	s.spec.Log.Debug().Int(s.spec.PIDField, p.pid).Msgf("%s started", s.spec.What)
	return r, nil
}

func (s *supervisor) hello(p *proc) error {
	frames, err := protocol.ReadFrames(p.stdout, s.limits)
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
	if w, _ := m.Get("wire").(int64); w != s.wire {
		return fmt.Errorf("it speaks wire version %s, this scheduler %d", protocol.String(m.Get("wire")), s.wire)
	}
	return nil
}

// serve reads until the process's output ends, then reaps it and fails
// what it owed.
func (s *supervisor) serve(r *running) {
	r.pipe.readLoop()
	r.status = r.p.wait()
	r.pipe.close(&errProcGone{What: s.spec.What, Status: r.status})
	s.mu.Lock()
	if s.cur == r {
		s.cur = nil
	}
	closed := s.closed
	s.mu.Unlock()
	close(r.exited)
	if closed {
		s.spec.Log.Debug().Int(s.spec.PIDField, r.p.pid).Str("status", r.status).Msgf("%s stopped", s.spec.What)
		return
	}
	if s.onExit != nil {
		s.onExit(r.p.pid, r.status)
	}
}

// close stops the process (EOF on its stdin; SIGKILL after grace) and
// joins every goroutine. Idempotent.
func (s *supervisor) close(grace time.Duration) {
	s.mu.Lock()
	s.closed = true
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
