package scheduler

import "daskgo/protocol"

// The P2P shuffle RPCs of workers (ShuffleSchedulerPlugin's handlers),
// handled in shuffle.go.

// ShuffleGetOrCreate is the shuffle_get_or_create RPC: the first transfer
// task of a shuffle on a worker asks for the run, creating it if needed.
type ShuffleGetOrCreate struct {
	Base
	ShuffleID string
	Key       protocol.Key // the calling task
	Worker    string
	ReplyTo   int64
}

// ShuffleGet is the shuffle_get RPC: a worker needs an existing run.
type ShuffleGet struct {
	Base
	ShuffleID string
	Worker    string
	ReplyTo   int64
}

// ShuffleBarrier is the shuffle_barrier RPC of the barrier task. The reply
// is a ShuffleBarrierPlan (the outer ring then calls shuffle_inputs_done on
// every participant before answering the worker), nil (an inconsistent
// barrier restarted the shuffle), or an error to raise in the worker.
type ShuffleBarrier struct {
	Base
	ShuffleID  string
	RunID      int64
	Consistent bool
	ReplyTo    int64
}

// ShuffleRestrictTask is the shuffle_restrict_task RPC: an output task ran
// on the wrong worker and is about to raise Reschedule.
type ShuffleRestrictTask struct {
	Base
	ShuffleID string
	RunID     int64
	Key       protocol.Key
	Worker    string
	ReplyTo   int64
}

// ReplyID implements Replier. A shuffle RPC whose run the helper is still
// building is parked in the run's waiters (shuffleParked).
func (x *ShuffleGetOrCreate) ReplyID() int64 { return x.ReplyTo }

// ReplyID implements Replier.
func (x *ShuffleGet) ReplyID() int64 { return x.ReplyTo }

// ReplyID implements Replier.
func (x *ShuffleBarrier) ReplyID() int64 { return x.ReplyTo }

// ReplyID implements Replier.
func (x *ShuffleRestrictTask) ReplyID() int64 { return x.ReplyTo }
