package server

import (
	"sync"
	"sync/atomic"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// Membership as the outside watches it: subscribe_worker_status streams
// (adapt.go) and the counters /metrics reports. The loop calls
// noteMembership with each outbox's Joined and Left.

// statusSubscribers are the open subscribe_worker_status streams.
type statusSubscribers struct {
	mu   sync.Mutex // guards next and subs
	next int
	subs map[int]*comm.BatchedSend
}

func (r *statusSubscribers) add(b *comm.BatchedSend) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.subs == nil {
		r.subs = map[int]*comm.BatchedSend{}
	}
	r.next++
	r.subs[r.next] = b
	return r.next
}

func (r *statusSubscribers) remove(id int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.subs, id)
}

func (r *statusSubscribers) send(msg any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.subs {
		_ = b.Send(msg)
	}
}

func (r *statusSubscribers) empty() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.subs) == 0
}

// counters are the outer ring's totals for /metrics.
type counters struct {
	clientsAdded, clientsRemoved atomic.Int64
	workersAdded, workersRemoved atomic.Int64
	ticks                        atomic.Int64
	tickMaxNanos                 atomic.Int64 // since the last scrape
	// lockHeldMaxNanos is the longest the engine's lock was held since the
	// last scrape: what a holder's wait would show (doc.go's rule).
	lockHeldMaxNanos atomic.Int64
}

// maxStore raises m to v if v is larger. Its writers hold the engine's lock
// and its reader swaps it, so a load then store loses nothing but a race
// with a scrape, which only resets it.
func maxStore(m *atomic.Int64, v int64) {
	if v > m.Load() {
		m.Store(v)
	}
}

// noteMembership runs under the engine's lock after each stimulus: it tells the
// subscribers (["add", {"workers": {address: identity}}] without metrics
// and last_seen, ["remove", address]) and counts.
func (s *Server) noteMembership(st *scheduler.State, out *scheduler.Outbox) {
	s.counters.workersAdded.Add(int64(len(out.Joined)))
	s.counters.workersRemoved.Add(int64(len(out.Left)))
	if s.statusSubs.empty() {
		return
	}
	for _, a := range out.Joined {
		if ws := st.Worker(a); ws != nil {
			ident := st.WorkerIdentity(ws)
			stripVolatile(ident)
			s.statusSubs.send([]any{"add", protocol.NewMap("workers", protocol.NewMap(a, ident))})
		}
	}
	for _, a := range out.Left {
		s.statusSubs.send([]any{"remove", a})
	}
}
