package scheduler

import (
	"daskgo/protocol"
	"daskgo/scheduler/coord"
)

// The coordination extensions (Lock, Semaphore, MultiLock, Event, Variable,
// Queue, published datasets, metadata) live in scheduler/coord; this file
// is the engine's side of them: the stimulus that carries their ops, and
// coord.Host, through which they answer RPCs and hold futures with
// pseudo-clients.

// CoordOp is a coordination RPC or stream op (coord.Op) as a stimulus.
type CoordOp struct {
	Base
	Op coord.Op
}

// ReplyID is the RPC the op answers (0 for stream ops).
func (x *CoordOp) ReplyID() int64 {
	if c, ok := x.Op.(interface{ ReplyID() int64 }); ok {
		return c.ReplyID()
	}
	return 0
}

// heldStream is the client whose stream carried the op, for ops that must
// wait behind that client's update-graph (they name its futures).
func (x *CoordOp) heldStream() string {
	switch op := x.Op.(type) {
	case *coord.VariableFutureReceived:
		return op.Client
	case *coord.QueueFutureRelease:
		return op.Client
	case *coord.PublishFlush:
		return op.Client
	}
	return ""
}

// Coordination is the engine's coordination extensions, for read-only
// accessors (SemaphoreLeases, PublishedNames, ...) under the outer ring's
// lock (scheduler/server/doc.go).
func (s *State) Coordination() *coord.Coordinator { return s.coord }

// Parked reports whether the RPC id waits for a later stimulus to answer
// it (Replier): a coordination wait, or a shuffle run being built.
func (s *State) Parked(id int64) bool { return s.coord.Parked(id) || s.shuffleParked(id) }

// coordHost is coord.Host over the engine.
type coordHost struct{ s *State }

func (h coordHost) Reply(id int64, v any) { h.s.reply(id, v) }

func (h coordHost) Logf(level coord.LogLevel, key protocol.Key, worker, client, format string, args ...any) {
	h.s.logf(level, key, worker, client, format, args...)
}

func (h coordHost) DesireKeys(keys []protocol.Key, client string) {
	h.s.clientDesiresKeys(keys, client)
}

func (h coordHost) ReleaseKeys(keys []protocol.Key, client string) {
	h.s.clientReleasesKeys(keys, client)
}

func (h coordHost) RemoveClient(client string) { h.s.removeClient(client) }

func (h coordHost) FutureState(key protocol.Key) (coord.FutureState, bool) {
	ts := h.s.tasks.get(key)
	if ts == nil {
		return coord.FutureState{}, false
	}
	fs := coord.FutureState{State: ts.state.String()}
	if ts.state == StatusErred && ts.blame() != nil {
		e := ts.blame().x()
		fs.Erred, fs.Exception, fs.Traceback = true, e.exception, e.traceback
	}
	return fs, true
}
