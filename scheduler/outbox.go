package scheduler

import (
	"slices"
	"strings"

	"daskgo/protocol"
)

// Filling the Outbox. Every task-finished sends at least one worker and one
// client message, so the per-Handle cost of the Outbox's peer lists and
// per-peer slices is a large share of the engine's allocations
// (BenchmarkSubmitFinish). The outer ring may hand a sent Outbox back
// through Recycle; its lists and slices are then reused by later Handles.
// Without Recycle nothing is reused and every Outbox is fresh, as before.
//
// The messages of a Handle are kept per peer in a list (Peers), not a map
// keyed by address: a peer is found by the WorkerState's note of its place
// in this Handle's list, or by a scan of the few peers a Handle writes to.
// Hashing the address for every message, and ranging over and clearing the
// map in Recycle, were about 6 % of the engine's instructions replaying the
// 100k-task tree over 1,000 simulated workers (cachegrind).

const (
	// spareSlicesMax bounds the recycled per-peer slices kept; spareCapMax
	// drops slices grown by a burst so one big release pins no memory.
	spareSlicesMax = 64
	spareCapMax    = 1024
	// spareListMax: a peer list that held more peers is not kept for reuse
	// (nor its slices: they went to many peers, once).
	spareListMax = 64
	// peerScanMax: up to this many peers a Handle's list is scanned for a
	// peer; past it the list is indexed by a map for the rest of the Handle
	// (a graph's compute-tasks going out to every worker).
	peerScanMax = 8
	// spareHooksMax: a recycled hooks slice holds at most this many events
	// (128 bytes each), so a graph's burst of transitions is not kept.
	spareHooksMax = 4096
)

// outPool holds what Recycle handed back.
type outPool struct {
	workers, clients Peers
	slices           [][]*protocol.Map
	// hooks: an Outbox.Hooks the ring has queued (copied) for the plugins;
	// a counting plugin sees about five events a task, and growing a fresh
	// slice for each Handle was a copy per doubling
	hooks []HookEvent
}

// outIndex indexes the Handle's Workers and Clients by peer once either
// holds more than peerScanMax peers (nil until then; begin drops them).
// A worker's place is also noted on it: WorkerState.outSeq ==
// State.outSeq means it is WorkerState.outPos in this Handle's Workers.
type outIndex struct {
	workers, clients map[string]int32
}

// Recycle returns an Outbox the outer ring has finished with (every stream
// message handed to its batched stream, which copies the pointers) so its
// lists and slices are reused by later Handle calls. The messages
// themselves are not reused: streams may still hold them. Recycle an Outbox
// at most once, after every copy of it is done with: its lists go to a
// later Handle. out is zeroed. Recycling is optional.
func (s *State) Recycle(out *Outbox) {
	if out == nil {
		return
	}
	s.pool.workers = s.recyclePeers(s.pool.workers, out.Workers)
	s.pool.clients = s.recyclePeers(s.pool.clients, out.Clients)
	if h := out.Hooks; cap(h) > 0 && cap(h) <= spareHooksMax {
		clear(h) // drop the keys and kwargs they point at
		s.pool.hooks = h[:0]
	}
	*out = Outbox{}
}

func (s *State) recyclePeers(keep, l Peers) Peers {
	if cap(l) == 0 || len(l) > spareListMax {
		return keep
	}
	for i := range l {
		msgs := l[i].Msgs
		if cap(msgs) <= spareCapMax && len(s.pool.slices) < spareSlicesMax {
			clear(msgs) // drop the message pointers: the GC may free them once sent
			s.pool.slices = append(s.pool.slices, msgs[:0])
		}
	}
	clear(l) // the peers' names and slices
	if keep == nil {
		return l[:0]
	}
	return keep
}

// peerSlot is the place of peer in *l, added with no messages when the
// Handle has not written to it yet. idx indexes *l once it is long.
func (s *State) peerSlot(l *Peers, spare *Peers, idx *map[string]int32, peer string) int {
	if *idx != nil {
		if i, ok := (*idx)[peer]; ok {
			return int(i)
		}
	} else if i := l.index(peer); i >= 0 {
		return i
	}
	if *l == nil && *spare != nil {
		*l, *spare = *spare, nil
	}
	var msgs []*protocol.Map
	if n := len(s.pool.slices); n > 0 {
		msgs = s.pool.slices[n-1]
		s.pool.slices[n-1] = nil
		s.pool.slices = s.pool.slices[:n-1]
	}
	*l = append(*l, PeerMsgs{Peer: peer, Msgs: msgs})
	i := len(*l) - 1
	switch {
	case *idx != nil:
		(*idx)[peer] = int32(i)
	case len(*l) > peerScanMax:
		m := make(map[string]int32, 2*len(*l))
		for j := range *l {
			m[(*l)[j].Peer] = int32(j)
		}
		*idx = m
	}
	return i
}

func (s *State) toWorker(ws *WorkerState, m *protocol.Map) {
	l := &s.out.Workers
	if ws.outSeq != s.outSeq {
		ws.outSeq = s.outSeq
		ws.outPos = int32(s.peerSlot(l, &s.pool.workers, &s.outIdx.workers, ws.Address))
	}
	e := &(*l)[ws.outPos]
	e.Msgs = append(e.Msgs, m)
}

// toWorkerAddr sends to a worker known only by its address (one that may
// be gone).
func (s *State) toWorkerAddr(addr string, m *protocol.Map) {
	l := &s.out.Workers
	e := &(*l)[s.peerSlot(l, &s.pool.workers, &s.outIdx.workers, addr)]
	e.Msgs = append(e.Msgs, m)
}

// toClient sends to a client that has a stream; distributed's report()
// skips clients without a comm (fire-and-forget, publish pseudo-clients).
func (s *State) toClient(cs *ClientState, m *protocol.Map) {
	if cs.connected {
		s.toClientID(cs.ID, m)
	}
}

func (s *State) toClientID(id string, m *protocol.Map) {
	l := &s.out.Clients
	e := &(*l)[s.peerSlot(l, &s.pool.clients, &s.outIdx.clients, id)]
	e.Msgs = append(e.Msgs, m)
}

// Reply answers the RPC whose stimulus carried ReplyTo.
type Reply struct {
	To    int64
	Value any
}

// Outbox is everything one Handle call wants sent: the explicit form of
// distributed's (client_msgs, worker_msgs). Stream messages keep their order
// per peer. The outer ring sends it after Handle returns; the engine never
// touches a socket.
type Outbox struct {
	// Workers and Clients are the stream messages, per worker address
	// and per client id, each peer once, in the order first written to.
	Workers Peers
	Clients Peers
	Helper  []HelperRequest
	// ShuffleRuns asks the helper to build P2P shuffle runs; each answer
	// comes back as a ShuffleRunCreated stimulus.
	ShuffleRuns []ShuffleRunRequest
	Replies     []Reply
	// Disconnect lists workers whose streams the outer ring must close
	// after sending their messages (worker-ttl, RemoveWorker.Close).
	Disconnect []string
	// RestartViaNanny asks the outer ring to have these workers' nannies
	// kill them (a nanny starts a fresh worker process); a worker whose
	// nanny does not answer is then removed with RemoveWorker{Close: true}
	// (check_worker_ttl → restart_workers).
	RestartViaNanny []NannyRestart
	// Logs is what the engine wants logged (bad peer input, lost data);
	// the engine itself never logs.
	Logs []LogEntry
	// Joined and Left are the workers added and removed by this stimulus,
	// for subscribe_worker_status and the membership counters.
	Joined, Left []string
	// Hooks are the scheduler plugin hook calls, in distributed's order;
	// only while a listener is set (hooks.go).
	Hooks []HookEvent
}

// NannyRestart is one worker to restart through its nanny.
type NannyRestart struct {
	Worker, Nanny, Reason string
}

// Peers is an Outbox's stream messages by peer: each peer once, in the
// order the engine first wrote to it.
type Peers []PeerMsgs

// PeerMsgs is one peer's messages, in order.
type PeerMsgs struct {
	Peer string
	Msgs []*protocol.Map
}

// Of returns peer's messages, nil when there are none: a scan, for tests
// and the odd lookup.
func (p Peers) Of(peer string) []*protocol.Map {
	if i := p.index(peer); i >= 0 {
		return p[i].Msgs
	}
	return nil
}

// index is peer's place in p, or -1.
func (p Peers) index(peer string) int {
	for i := range p {
		if p[i].Peer == peer {
			return i
		}
	}
	return -1
}

// Sorted is p in peer order, for a consumer whose order must not depend on
// the engine's order of first writes (the simulator's deliveries, its
// digest). It is a copy unless p needs no sorting; read it only.
func (p Peers) Sorted() Peers {
	if len(p) < 2 {
		return p
	}
	out := slices.Clone(p)
	slices.SortFunc(out, func(a, b PeerMsgs) int { return strings.Compare(a.Peer, b.Peer) })
	return out
}

// answers reports whether the outbox already answers the RPC id.
func (o *Outbox) answers(id int64) bool {
	for _, r := range o.Replies {
		if r.To == id {
			return true
		}
	}
	return false
}
