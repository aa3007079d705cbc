package server

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// Scheduler plugin hooks: the engine's HookEvents (scheduler/hooks.go) on
// their way to the plugins in the Python host.
//
//	engine lock holder ──push──▶ hookQueue (bounded) ──pump goroutine──▶ host "hooks" call
//	  (never waits)                 drops past max            (one batch in flight,
//	                                and counts                 answered once run)
//
// The engine never waits on the host (doc.go's rule): push appends to the
// queue under a leaf lock and returns. One pump goroutine (owned by the
// Server, ends with it) takes what is queued, encodes it outside any lock,
// and calls the host with the batch; the host answers once every plugin
// hook of the batch has run, so at most one batch is in flight and the
// queue is where a slow plugin's backlog waits. When the backlog reaches
// hookQueueMax events, newer events are dropped and counted: memory stays
// bounded (a queued event is 128 B, so 128 MiB at most, plus 216 B of
// kwargs for each finished or erred task's, which arrive paced by the
// workers; and the batch in flight), the log
// says how many were dropped and how far behind the plugins are, and the
// host is told the running total (it logs it too). A plugin that counts
// transitions then counts fewer; no task is affected, since the engine
// never reads anything back. distributed runs hooks inline on its event
// loop, so a slow plugin there slows the whole scheduler instead.

const (
	// hookQueueMax: events queued for the host, at most. One update-graph
	// of a 200k-task tree reports about 400k transitions at once (each
	// task's released->waiting, the roots' next step): the bound must hold
	// such a burst whole while a plugin keeps up.
	hookQueueMax = 1 << 20
	hookBatchMax = 8192 // events per call to the host, at most
	// hookLinger: after waking, the pump lets events gather this long
	// before it calls the host, unless a full batch is queued. Each call
	// costs both processes a round trip (encode, two pipe writes, a task on
	// the host's loop), and a computation's task-finished messages arrive a
	// few events at a time: without it a map of 20k tasks made one call
	// per handful of events. Plugins see events at most this much later
	// after a quiet spell, hookLingerBusy later while events keep coming.
	hookLinger = 5 * time.Millisecond
	// hookLingerBusy is the linger while events keep coming, the last call
	// having gone out less than hookBusyGap before: a computation's steady
	// stream. A call costs something of its own besides its events, in the
	// host (reading it, waking its loop from the reader thread, the
	// request's task, the answer) and in the Go process (the pump's and the
	// pipe's goroutines waking): on a map of 20k tasks with a counting
	// plugin, 20 ms instead of 5 while busy took the host from 1.10 to
	// 0.57 s. The first events after a quiet spell still wait only
	// hookLinger.
	hookLingerBusy = 20 * time.Millisecond
	hookBusyGap    = 50 * time.Millisecond
	hookLagWarn    = 2 * time.Second
	hookLogEvery   = 10 * time.Second // at most one lag or drop warning per period
)

// hookQueue is the bounded queue between the engine and the pump.
type hookQueue struct {
	mu      sync.Mutex // a leaf: held for appends and swaps only
	events  []scheduler.HookEvent
	since   time.Time // when the oldest queued event was pushed
	dropped uint64    // events dropped since the start
	max     int
	wake    chan struct{}
}

func newHookQueue(max int) *hookQueue {
	return &hookQueue{max: max, wake: make(chan struct{}, 1)}
}

// push appends evs, dropping what exceeds max. It runs under the engine's
// lock: no allocation beyond the queue's growth, no waiting.
func (q *hookQueue) push(evs []scheduler.HookEvent, now time.Time) {
	q.mu.Lock()
	if len(q.events) == 0 {
		q.since = now
	}
	room := q.max - len(q.events)
	if room < len(evs) {
		q.dropped += uint64(len(evs) - max(room, 0))
		evs = evs[:max(room, 0)]
	}
	q.events = append(q.events, evs...)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take moves up to n events from the front into dst (emptied first, its
// array reused: the pump's, between batches); backlog is what stays, lag
// how long the oldest taken waited.
func (q *hookQueue) take(dst []scheduler.HookEvent, n int, now time.Time) (batch []scheduler.HookEvent, backlog int, lag time.Duration, dropped uint64) {
	clear(dst)
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.events) == 0 {
		return dst[:0], 0, 0, q.dropped
	}
	n = min(n, len(q.events))
	batch = append(dst[:0], q.events[:n]...)
	lag = now.Sub(q.since)
	rest := copy(q.events, q.events[n:])
	clear(q.events[rest:])
	q.events = q.events[:rest]
	if rest == 0 && cap(q.events) > 4*hookBatchMax {
		q.events = nil // a burst's backing array goes back to the GC
	}
	if rest > 0 {
		q.since = now // the rest waited at most this long; close enough for a warning
	}
	return batch, rest, lag, q.dropped
}

func (q *hookQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.events)
}

// stats are the events queued now and those dropped since the start.
func (q *hookQueue) stats() (queued, dropped int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(len(q.events)), int64(q.dropped)
}

// reset drops every queued event (the host died: nobody listens).
func (q *hookQueue) reset() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.events)
	q.events = nil
	return n
}

// hookSender is the host's side of the pump: compat.Host.Call, and
// whether a host runs (events never start one).
type hookSender interface {
	Call(ctx context.Context, op string, body *protocol.Map) (*protocol.Map, error)
	PID() int
}

// lingerAfter is how long the pump lets events gather once woken at now,
// its last host call having gone out at lastCall (zero: none yet):
// hookLingerBusy while events keep coming, else hookLinger.
func lingerAfter(lastCall, now time.Time) time.Duration {
	if !lastCall.IsZero() && now.Sub(lastCall) < hookBusyGap {
		return hookLingerBusy
	}
	return hookLinger
}

// pumpHooks sends the queued events to the host until ctx ends.
func pumpHooks(ctx context.Context, q *hookQueue, host hookSender, clock Clock, log zerolog.Logger) {
	var lastWarn time.Time
	var warnedDropped uint64
	var batch []scheduler.HookEvent // reused: one batch in flight at a time
	var wire []byte                 // the batch's encoding, reused likewise
	var lastCall time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.wake:
		}
		if q.len() < hookBatchMax {
			select {
			case <-ctx.Done():
				return
			case <-clock.After(lingerAfter(lastCall, clock.Now())):
			}
		}
		for {
			now := clock.Now()
			var backlog int
			var lag time.Duration
			var dropped uint64
			batch, backlog, lag, dropped = q.take(batch, hookBatchMax, now)
			if len(batch) == 0 {
				break
			}
			if (lag > hookLagWarn || dropped > warnedDropped) && now.Sub(lastWarn) > hookLogEvery {
				log.Warn().Dur("lag", lag).Int("queued", backlog).Uint64("dropped_total", dropped).
					Msg("scheduler plugins fall behind: hook events wait in a bounded queue, the newest are dropped once it is full")
				lastWarn, warnedDropped = now, dropped
			}
			if host.PID() == 0 {
				continue // no host: nothing listens (its exit turned the hooks off)
			}
			var events any
			var ok bool
			if wire, ok = appendHookEvents(wire[:0], batch); ok {
				events = protocol.Raw(wire) // Call encodes it before it returns
			} else {
				events = hookEventsWire(batch)
			}
			body := protocol.NewMap("events", events, "dropped", dropped)
			lastCall = now
			ans, err := host.Call(ctx, "hooks", body)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				log.Warn().Err(err).Int("events", len(batch)).Msg("scheduler plugin hook events lost")
				continue
			}
			if st, _ := ans.Get("status").(string); st != "OK" {
				log.Warn().Str("error", protocol.String(ans.Get("exception_text"))).Msg("host failed a batch of hook events")
			}
		}
	}
}
