package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// loop is the engine's lock and the queue in front of it. Who may hold
// the lock, what a holder may do, and in what order stimuli apply: the
// rule in doc.go ("The engine's lock").
type loop struct {
	srv   *Server
	state *scheduler.State

	mu    sync.Mutex          // the engine, dirty and undrained
	dirty []*comm.BatchedSend // streams queued to since the last flush
	// undrained: streams that may still hold engine messages
	// (BatchedSend.Drained false after their flush), as a list and a set
	undrained    []*comm.BatchedSend
	undrainedSet map[*comm.BatchedSend]bool

	// events holds stimuli and queries for the lock's next holder, in the
	// order they were queued. Only a holder of mu receives from it, and
	// every holder first applies what is queued, so nothing overtakes an
	// event queued before its holder took the lock. Bounded: a full queue
	// makes the goroutine that queues wait (back-pressure on RPC handlers
	// and tickers), never a holder of mu.
	events chan event
	wake   chan struct{} // capacity 1: the loop goroutine's "the queue may hold events"

	replyMu sync.Mutex // guards replies: RPC handlers register slots, holders deliver to them
	replies map[int64]chan any
	nextID  atomic.Int64
}

type event struct {
	stim  scheduler.Stimulus
	query func(*scheduler.State)
	done  chan struct{}
}

// queueLength bounds loop.events.
const queueLength = 4096

func newLoop(srv *Server, st *scheduler.State) *loop {
	return &loop{srv: srv, state: st, events: make(chan event, queueLength), wake: make(chan struct{}, 1),
		replies: map[int64]chan any{}, undrainedSet: map[*comm.BatchedSend]bool{}}
}

// run is the loop goroutine, the door for queued events that no stream
// reader or RPC goroutine takes in first.
func (l *loop) run() {
	for {
		select {
		case <-l.srv.ctx.Done():
			return
		case <-l.wake:
			l.enter(nil)
		}
	}
}

// handleBatch runs a stream batch's stimuli through the engine on the
// calling goroutine (the stream's reader), after what was queued before
// it, then writes what they produced. After shutdown it drops them.
func (l *loop) handleBatch(batch []scheduler.Stimulus) { l.enter(batch) }

// enter takes the engine's lock, applies the queued events in order, then
// own, flushes the streams they queued to, and lets go. It is the one way
// in: doc.go's rule is kept here.
func (l *loop) enter(own []scheduler.Stimulus) {
	var dones []chan struct{}
	l.mu.Lock()
	took := l.srv.clock.Now()
	if l.srv.ctx.Err() == nil {
		// only what is queued now: a holder never serves a stream that
		// keeps filling while it holds the lock
		for n := len(l.events); n > 0; n-- {
			ev := <-l.events
			if ev.stim != nil {
				l.handle(ev.stim)
			}
			if ev.query != nil {
				ev.query(l.state)
			}
			if ev.done != nil {
				dones = append(dones, ev.done)
			}
		}
		for _, st := range own {
			l.handle(st)
		}
		l.flush()
	}
	maxStore(&l.srv.counters.lockHeldMaxNanos, l.srv.clock.Now().Sub(took).Nanoseconds())
	l.mu.Unlock()
	for _, d := range dones {
		close(d)
	}
}

// flush writes every stream the last event or batch queued to: one write
// per stream, whatever the number of stimuli.
func (l *loop) flush() {
	for i, b := range l.dirty {
		b.Flush()
		if !b.Drained() && !l.undrainedSet[b] {
			l.undrained = append(l.undrained, b)
			l.undrainedSet[b] = true
		}
		l.dirty[i] = nil
	}
	l.dirty = l.dirty[:0]
	l.messagesWrittenMaybe()
}

// messagesWrittenMaybe tells the engine its messages are written
// (State.MessagesWritten, so it builds later ones in them) once every
// stream queued to since it last did holds none of them: a stream whose
// writer goroutine took a batch, or that is held, is asked again at the
// next flush, and the engine meanwhile builds fresh messages. It stops at
// the first stream still holding some, so a flush asks each stream once
// more than it drops, however many wait (a graph's first compute-tasks
// may leave a thousand writers busy).
func (l *loop) messagesWrittenMaybe() {
	for n := len(l.undrained); n > 0; n-- {
		b := l.undrained[n-1]
		if !b.Drained() {
			return
		}
		l.undrained[n-1] = nil
		l.undrained = l.undrained[:n-1]
		delete(l.undrainedSet, b)
	}
	l.state.MessagesWritten()
}

// queue appends msgs to a stream, to be written at the next flush.
func (l *loop) queue(b *comm.BatchedSend, msgs []*protocol.Map) {
	if len(msgs) == 0 {
		return
	}
	items := make([]any, len(msgs))
	for i, m := range msgs {
		items[i] = m
	}
	if b.Queue(items...) != nil {
		return // the stream is closing; its peer is being removed
	}
	for _, d := range l.dirty {
		if d == b {
			return
		}
	}
	l.dirty = append(l.dirty, b)
}

// handle runs one stimulus through the engine and sends what it returns
// (every RPC's answer among it: scheduler.Replier). Sending may produce
// stimuli of its own (a helper that cannot take a graph fails it); they are
// handled after, in order, never from inside dispatch.
func (l *loop) handle(st scheduler.Stimulus) {
	// pending holds what sending produced (rare): nil, not a slice made per
	// stimulus, until then
	for pending := []scheduler.Stimulus(nil); ; st, pending = pending[0], pending[1:] {
		var start time.Time
		if l.srv.tracing {
			start = l.srv.clock.Now()
		}
		out := l.state.Handle(st)
		if l.srv.tracing {
			traceStimulus(l.srv.log, st, start, l.srv.clock.Now())
		}
		pending = append(pending, l.dispatch(&out)...)
		l.srv.noteMembership(l.state, &out)
		if tick, ok := st.(*scheduler.Tick); ok {
			l.onTick(tick)
		}
		// The streams copied the message pointers: the engine may reuse the
		// outbox's maps and slices (about 3 allocations per task less).
		l.state.Recycle(&out)
		l.srv.memory.noteStimulus(st, l.state.NumTasks())
		if len(pending) == 0 {
			return
		}
	}
}

// onTick publishes the engine's view for the HTTP routes, counts the tick
// and how late it was handled, and applies the idle timeout.
func (l *loop) onTick(t *scheduler.Tick) {
	now := l.srv.clock.Now()
	c := &l.srv.counters
	c.ticks.Add(1)
	maxStore(&c.tickMaxNanos, now.Sub(t.At).Nanoseconds())
	l.srv.snap.onTick(l.state, now)
	l.srv.checkIdleTimeout(now, l.state.IdleSince())
}

// dispatch sends an outbox and returns the stimuli that sending produced.
func (l *loop) dispatch(out *scheduler.Outbox) (follow []scheduler.Stimulus) {
	for _, p := range out.Workers {
		if b := l.srv.workerStream(p.Peer); b != nil {
			l.queue(b, p.Msgs)
		}
	}
	for _, p := range out.Clients {
		if b := l.srv.clientStream(p.Peer); b != nil {
			l.queue(b, p.Msgs)
		}
	}
	for _, r := range out.Replies {
		l.deliver(r.To, r.Value)
	}
	for _, req := range out.Helper {
		if err := l.srv.mat.Submit(req); err != nil {
			// The helpers are gone for good (shutdown): fail the graph now.
			follow = append(follow, &scheduler.GraphMaterialized{
				Base:      scheduler.Base{ID: fmt.Sprintf("materialize-failed-%d", req.ID), At: l.srv.clock.Now()},
				RequestID: req.ID, Client: req.Client,
				Err: &scheduler.ErrorInfo{Exception: fmt.Sprintf("graph materializer unavailable: %v", err)},
			})
		}
	}
	for _, req := range out.ShuffleRuns {
		if err := l.srv.mat.SubmitShuffleRun(req); err != nil {
			// the waiting workers get the error instead of a run
			follow = append(follow, &scheduler.ShuffleRunCreated{
				Base:      scheduler.Base{ID: fmt.Sprintf("shuffle-run-failed-%d", req.RunID), At: l.srv.clock.Now()},
				ShuffleID: req.ShuffleID, RunID: req.RunID,
				Err: scheduler.RuntimeErrorInfo(fmt.Sprintf("graph materializer unavailable: %v", err)),
			})
		}
	}
	for _, addr := range out.Disconnect {
		l.srv.dropWorkerStream(addr)
	}
	if len(out.RestartViaNanny) > 0 {
		l.srv.restartSilentWorkers(out.RestartViaNanny)
	}
	for _, e := range out.Logs {
		l.logEntry(e)
	}
	if len(out.Hooks) > 0 {
		l.srv.pushHooks(out.Hooks)
	}
	return follow
}

// logEntry writes what the engine asked to log (it never logs itself).
func (l *loop) logEntry(e scheduler.LogEntry) {
	ev := l.srv.log.Debug()
	switch e.Level {
	case scheduler.LogWarn:
		ev = l.srv.log.Warn()
	case scheduler.LogInfo:
		ev = l.srv.log.Info()
	case scheduler.LogError:
		ev = l.srv.log.Error()
	}
	if e.Key != "" {
		ev = ev.Str("key", e.Key.String())
	}
	if e.Worker != "" {
		ev = ev.Str("worker", e.Worker)
	}
	if e.Client != "" {
		ev = ev.Str("client", e.Client)
	}
	ev.Msg(e.Msg)
}

// submit queues a stimulus without waiting for it to apply. An RPC
// handler that replies after it must wait instead (submitWait, call): the
// ordering rule in doc.go.
func (l *loop) submit(st scheduler.Stimulus) {
	l.push(event{stim: st})
}

// push queues ev for the lock's next holder and wakes the loop goroutine
// in case no other holder comes first. After shutdown it drops ev.
func (l *loop) push(ev event) bool {
	select {
	case l.events <- ev:
	case <-l.srv.ctx.Done():
		return false
	}
	select {
	case l.wake <- struct{}{}:
	default: // a wake-up is pending; it drains this event too
	}
	return true
}

// submitWait queues a stimulus and waits until the engine has handled it.
func (l *loop) submitWait(ctx context.Context, st scheduler.Stimulus) error {
	return l.await(ctx, event{stim: st, done: make(chan struct{})})
}

// query runs fn under the engine's lock and waits for it. fn may read the
// engine and copy out what it needs; what it may keep: doc.go.
func (l *loop) query(ctx context.Context, fn func(*scheduler.State)) error {
	return l.await(ctx, event{query: fn, done: make(chan struct{})})
}

// await queues ev and waits until a holder has applied it.
func (l *loop) await(ctx context.Context, ev event) error {
	if !l.push(ev) {
		return errShuttingDown
	}
	select {
	case <-ev.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-l.srv.ctx.Done():
		return errShuttingDown
	}
}

// call runs a stimulus that answers an RPC (a scheduler.Replier) and
// returns the engine's reply.
func (l *loop) call(ctx context.Context, mk func(replyTo int64) scheduler.Stimulus) (any, error) {
	id, ch := l.register()
	defer l.unregister(id)
	l.submit(mk(id))
	return l.reply(ctx, ch)
}

// callNow is call entered on the calling goroutine, as a stream's reader
// enters for its batch: an RPC answered where nothing else waits
// (heartbeat_worker, about 170 a second at 1,000 workers) costs no
// hand-off to the loop goroutine and back. A reply the engine parks is
// awaited as call awaits it.
func (l *loop) callNow(ctx context.Context, mk func(replyTo int64) scheduler.Stimulus) (any, error) {
	id, ch := l.register()
	defer l.unregister(id)
	l.enter([]scheduler.Stimulus{mk(id)}) // after shutdown it drops it: reply says so
	return l.reply(ctx, ch)
}

func (l *loop) reply(ctx context.Context, ch chan any) (any, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.srv.ctx.Done():
		return nil, errShuttingDown
	}
}

// register opens a reply slot for one RPC.
func (l *loop) register() (int64, chan any) {
	id := l.nextID.Add(1)
	ch := make(chan any, 1)
	l.replyMu.Lock()
	l.replies[id] = ch
	l.replyMu.Unlock()
	return id, ch
}

func (l *loop) unregister(id int64) {
	l.replyMu.Lock()
	delete(l.replies, id)
	l.replyMu.Unlock()
}

func (l *loop) deliver(to int64, v any) {
	l.replyMu.Lock()
	ch := l.replies[to]
	l.replyMu.Unlock()
	if ch != nil {
		select {
		case ch <- v:
		default:
		}
	}
}
