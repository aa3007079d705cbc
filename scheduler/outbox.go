package scheduler

import "daskgo/protocol"

// Filling the Outbox. Every task-finished sends at least one worker and one
// client message, so the per-Handle cost of the Outbox's maps and per-peer
// slices is a large share of the engine's allocations (BenchmarkSubmitFinish).
// The outer ring may hand a sent Outbox back through Recycle; its maps and
// slices are then reused by later Handles. Without Recycle nothing is
// reused and every Outbox is fresh, as before.

const (
	// spareSlicesMax bounds the recycled per-peer slices kept; spareCapMax
	// drops slices grown by a burst so one big release pins no memory.
	spareSlicesMax = 64
	spareCapMax    = 1024
	// spareMapMax: an outbox map that held more peers is not reused. A Go
	// map never shrinks, and ranging over or clearing one costs its size,
	// not its count: once a graph's compute-tasks went to 1,000 workers,
	// every later Recycle paid for a 1,000-peer map to hand back one or two
	// peers (18 % of the engine's time replaying a 100k-task tree over
	// 1,000 simulated workers, BenchmarkEngineReplay).
	spareMapMax = 64
	// spareHooksMax: a recycled hooks slice holds at most this many events
	// (128 bytes each), so a graph's burst of transitions is not kept.
	spareHooksMax = 4096
)

// outPool holds what Recycle handed back.
type outPool struct {
	workers, clients map[string][]*protocol.Map
	slices           [][]*protocol.Map
	// hooks: an Outbox.Hooks the ring has queued (copied) for the plugins;
	// a counting plugin sees about five events a task, and growing a fresh
	// slice for each Handle was a copy per doubling
	hooks []HookEvent
}

// Recycle returns an Outbox the outer ring has finished with (every stream
// message handed to its batched stream, which copies the pointers) so its
// maps and slices are reused by later Handle calls. The messages themselves
// are not reused: streams may still hold them. Recycle an Outbox at most
// once, after every copy of it is done with: its maps go to a later
// Handle. out is zeroed. Recycling is optional.
func (s *State) Recycle(out *Outbox) {
	if out == nil {
		return
	}
	s.pool.workers = s.recycleMap(s.pool.workers, out.Workers)
	s.pool.clients = s.recycleMap(s.pool.clients, out.Clients)
	if h := out.Hooks; cap(h) > 0 && cap(h) <= spareHooksMax {
		clear(h) // drop the keys and kwargs they point at
		s.pool.hooks = h[:0]
	}
	*out = Outbox{}
}

func (s *State) recycleMap(keep, m map[string][]*protocol.Map) map[string][]*protocol.Map {
	if m == nil {
		return keep
	}
	if len(m) > spareMapMax {
		return keep // its slices too: they went to many peers, once
	}
	for _, msgs := range m {
		if cap(msgs) <= spareCapMax && len(s.pool.slices) < spareSlicesMax {
			clear(msgs) // drop the message pointers: the GC may free them once sent
			s.pool.slices = append(s.pool.slices, msgs[:0])
		}
	}
	clear(m)
	if keep == nil {
		return m
	}
	return keep
}

// takeMap gives an empty map for an Outbox field, recycled when possible.
func takeMap(spare *map[string][]*protocol.Map) map[string][]*protocol.Map {
	if m := *spare; m != nil {
		*spare = nil
		return m
	}
	return map[string][]*protocol.Map{}
}

// appendPeer appends m to peer's messages, starting from a recycled slice
// when the peer has none yet in this Outbox.
func (s *State) appendPeer(dst map[string][]*protocol.Map, peer string, m *protocol.Map) {
	msgs, ok := dst[peer]
	if !ok {
		if n := len(s.pool.slices); n > 0 {
			msgs = s.pool.slices[n-1]
			s.pool.slices[n-1] = nil
			s.pool.slices = s.pool.slices[:n-1]
		}
	}
	dst[peer] = append(msgs, m)
}

func (s *State) toWorker(ws *WorkerState, m *protocol.Map) {
	s.toWorkerAddr(ws.Address, m)
}

func (s *State) toWorkerAddr(addr string, m *protocol.Map) {
	if s.out.Workers == nil {
		s.out.Workers = takeMap(&s.pool.workers)
	}
	s.appendPeer(s.out.Workers, addr, m)
}

// toClient sends to a client that has a stream; distributed's report()
// skips clients without a comm (fire-and-forget, publish pseudo-clients).
func (s *State) toClient(cs *ClientState, m *protocol.Map) {
	if cs.connected {
		s.toClientID(cs.ID, m)
	}
}

func (s *State) toClientID(id string, m *protocol.Map) {
	if s.out.Clients == nil {
		s.out.Clients = takeMap(&s.pool.clients)
	}
	s.appendPeer(s.out.Clients, id, m)
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
	Workers map[string][]*protocol.Map
	Clients map[string][]*protocol.Map
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

// ToWorker appends a stream message for the worker at addr.
func (o *Outbox) ToWorker(addr string, msg *protocol.Map) {
	if o.Workers == nil {
		o.Workers = map[string][]*protocol.Map{}
	}
	o.Workers[addr] = append(o.Workers[addr], msg)
}

// ToClient appends a stream message for client id.
func (o *Outbox) ToClient(id string, msg *protocol.Map) {
	if o.Clients == nil {
		o.Clients = map[string][]*protocol.Map{}
	}
	o.Clients[id] = append(o.Clients[id], msg)
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
