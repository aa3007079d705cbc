package compat

import (
	"context"
	"fmt"
	"sync"
	"time"

	"daskgo/protocol"
)

// The supervised-process piece, part 2: the framed pipe to one running
// process. Both directions carry dask-framed messages (protocol.Encode /
// distributed.protocol.dumps), each a dict with a "t":
//
//	{"t": "req", "id", "op", ...}  a request; exactly one "ans" answers it
//	{"t": "ans", "id", "status", ...}
//	{"t": "msg", "op", ...}        one-way
//
// Go numbers its requests 1, 2, 3...; the process numbers its own -1, -2...
//
// Per pipe, two goroutines, both ended by the process's exit (EOF on its
// stdout, EPIPE on its stdin) and joined by proc_supervise.go: the writer
// drains the outgoing queue (calls never wait for the pipe, posts are
// bounded: maxPosts, then dropped and counted), and the reader decodes
// what the process sends and dispatches it. A write that the process does
// not take within writeStall kills it: a process that stopped reading is
// as good as dead, and its callers learn so.

const (
	maxPosts   = 10000            // one-way messages queued to a process, at most
	writeStall = 60 * time.Second // a write the process takes no byte of, at most
)

// errProcGone fails a call whose process died; the error names the status.
type errProcGone struct {
	What, Status string
}

func (e *errProcGone) Error() string {
	return fmt.Sprintf("the %s exited (%s) before answering", e.What, e.Status)
}

// answer is what a call gets: the process's answer, or why none came.
type answer struct {
	msg *protocol.Map
	err error
}

// pipeHandlers are what the reader calls for what the process sends: a
// request (answered through reply, once, from any goroutine) and a one-way
// message. Both run on the reader goroutine and must not block on the
// process: a request's work belongs on a goroutine of its own.
type pipeHandlers struct {
	request func(op string, msg *protocol.Map, reply func(body *protocol.Map))
	message func(op string, msg *protocol.Map)
}

type msgPipe struct {
	p      *proc
	h      pipeHandlers
	limits protocol.Limits

	mu      sync.Mutex
	pending map[int64]chan answer
	nextID  int64
	out     []outMsg // encoded messages not yet written
	posts   int      // of which one-way
	dropped int64    // posts dropped because maxPosts were queued
	dead    error    // set when the process is gone: calls fail with it
	wake    chan struct{}
	done    chan struct{} // closed by close()
}

type outMsg struct {
	frames [][]byte
	post   bool // one-way: counted against maxPosts while queued
}

func newMsgPipe(p *proc, h pipeHandlers, limits protocol.Limits) *msgPipe {
	return &msgPipe{p: p, h: h, limits: limits, pending: map[int64]chan answer{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// call sends a request and waits for its answer, ctx, or the process's
// death (an *errProcGone naming its exit status).
func (mp *msgPipe) call(ctx context.Context, op string, body *protocol.Map) (*protocol.Map, error) {
	mp.mu.Lock()
	if mp.dead != nil {
		mp.mu.Unlock()
		return nil, mp.dead
	}
	mp.nextID++
	id := mp.nextID
	ch := make(chan answer, 1)
	mp.pending[id] = ch
	mp.mu.Unlock()
	if err := mp.enqueue(envelope("req", op, id, body), false); err != nil {
		mp.forget(id)
		return nil, err
	}
	select {
	case a := <-ch:
		return a.msg, a.err
	case <-ctx.Done():
		mp.forget(id)
		return nil, fmt.Errorf("%s %s: %w", mp.p.spec.What, op, ctx.Err())
	}
}

func (mp *msgPipe) forget(id int64) {
	mp.mu.Lock()
	delete(mp.pending, id)
	mp.mu.Unlock()
}

// post queues a one-way message; false if it was dropped (the queue is
// full or the process is gone).
func (mp *msgPipe) post(op string, body *protocol.Map) bool {
	return mp.enqueue(envelope("msg", op, 0, body), true) == nil
}

// answerRequest answers the process's request id.
func (mp *msgPipe) answerRequest(id int64, body *protocol.Map) {
	_ = mp.enqueue(envelope("ans", "", id, body), false)
}

func envelope(t, op string, id int64, body *protocol.Map) *protocol.Map {
	m := protocol.NewMap("t", t)
	if op != "" {
		m.Set("op", op)
	}
	if t != "msg" {
		m.Set("id", id)
	}
	if body != nil {
		for _, e := range body.Entries {
			if k, _ := e.Key.(string); k != "t" && k != "id" && (k != "op" || op == "") {
				m.Entries = append(m.Entries, e)
			}
		}
	}
	return m
}

func (mp *msgPipe) enqueue(m *protocol.Map, isPost bool) error {
	frames, err := protocol.Encode(m, nil)
	if err != nil {
		return fmt.Errorf("encode a message to the %s: %w", mp.p.spec.What, err)
	}
	mp.mu.Lock()
	defer mp.mu.Unlock()
	if mp.dead != nil {
		return mp.dead
	}
	if isPost {
		if mp.posts >= maxPosts {
			mp.dropped++
			if mp.dropped%1000 == 1 { // the host is behind: say so, not per message
				mp.p.spec.Log.Warn().Int64("dropped", mp.dropped).Int("queued", mp.posts).
					Msgf("the %s is not keeping up; one-way messages dropped", mp.p.spec.What)
			}
			return fmt.Errorf("%s: %d messages queued, message dropped", mp.p.spec.What, maxPosts)
		}
		mp.posts++
	}
	mp.out = append(mp.out, outMsg{frames, isPost})
	select {
	case mp.wake <- struct{}{}:
	default:
	}
	return nil
}

// writeLoop writes queued messages until the pipe closes or a write fails.
func (mp *msgPipe) writeLoop() {
	for {
		mp.mu.Lock()
		batch := mp.out
		mp.out = nil
		mp.mu.Unlock()
		for _, o := range batch {
			if o.post {
				mp.mu.Lock()
				mp.posts--
				mp.mu.Unlock()
			}
			if err := mp.p.writeFrames(o.frames); err != nil {
				return
			}
		}
		select {
		case <-mp.wake:
		case <-mp.done:
			return
		}
	}
}

// readLoop reads what the process sends until its stdout closes.
func (mp *msgPipe) readLoop() {
	mp.p.readMessages(mp.limits, "message", func(frames [][]byte) (any, error) {
		v, err := protocol.Decode(frames)
		if _, ok := v.(*protocol.Map); err == nil && !ok {
			err = fmt.Errorf("a message is %s, not a dict", truncate(protocol.String(v)))
		}
		return v, err
	}, func(v any) { mp.dispatch(v.(*protocol.Map)) })
}

func (mp *msgPipe) dispatch(m *protocol.Map) {
	t, _ := m.Get("t").(string)
	op, _ := m.Get("op").(string)
	id, _ := m.Get("id").(int64)
	switch t {
	case "ans":
		mp.mu.Lock()
		ch := mp.pending[id]
		delete(mp.pending, id)
		mp.mu.Unlock()
		if ch != nil {
			ch <- answer{msg: m}
		}
	case "req":
		if mp.h.request == nil {
			mp.answerRequest(id, protocol.NewMap("status", "error", "error", "no requests are served to this process"))
			return
		}
		mp.h.request(op, m, func(body *protocol.Map) { mp.answerRequest(id, body) })
	case "msg":
		if mp.h.message != nil {
			mp.h.message(op, m)
		}
	default:
		mp.p.spec.Log.Warn().Str("t", t).Msgf("%s sent a message of no known type", mp.p.spec.What)
	}
}

// close marks the pipe dead with cause and fails every call in flight with
// it. Called once the process has exited.
func (mp *msgPipe) close(cause error) {
	mp.mu.Lock()
	if mp.dead == nil {
		mp.dead = cause
		close(mp.done)
	}
	pending := mp.pending
	mp.pending = map[int64]chan answer{}
	mp.out = nil
	mp.mu.Unlock()
	for _, ch := range pending {
		ch <- answer{err: cause}
	}
}

// inflight is the number of calls waiting for an answer.
func (mp *msgPipe) inflight() int {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	return len(mp.pending)
}
