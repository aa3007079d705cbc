package scheduler

import "time"

// This file and stimuli_*.go are the contract between the engine (the inner
// ring, package scheduler) and the outer ring (scheduler/server) that owns
// sockets, clocks and the materializer helpers. The outer ring decodes wire
// messages into these typed stimuli once, at the edge (a malformed field is
// refused there, with an error to the peer), calls State.Handle under its
// lock (scheduler/server/doc.go), and sends the returned Outbox (outbox.go). The
// engine never reads a wire value: what it only relays (a run_spec, a
// dataset, an exception) is carried opaque. Field names follow the wire ops
// they come from; stimuli_worker.go, stimuli_client.go, stimuli_helper.go,
// stimuli_shuffle.go and stimuli_tick.go group them by who sends them, and
// coordination.go carries the coordination extensions' ops (scheduler/coord).

// Stimulus is one input to the engine.
type Stimulus interface {
	base() *Base
}

// Replier is a stimulus that answers an RPC: ReplyID names the caller's
// reply slot (0: nobody waits). The engine answers every Replier exactly
// once in an Outbox's Replies: in the outbox of the stimulus itself, or,
// when it parks the call (a Lock acquire, an Event wait, a shuffle run the
// helper is still building, a stimulus held behind its client's graph),
// in the outbox of the later stimulus that settles it. A Replier that the
// engine neither answers nor parks gets None, as a distributed handler
// that returns None does. The outer ring only delivers Replies.
type Replier interface {
	Stimulus
	ReplyID() int64
}

// Base carries what every stimulus has: distributed's stimulus_id and the
// logical time at which it happened (tests set it; production uses the
// arrival time).
type Base struct {
	ID string
	At time.Time
}

func (b *Base) base() *Base { return b }

// Tick lets time-based rules run (worker-ttl, unrunnable timeouts).
type Tick struct {
	Base
}
