package scheduler

import "time"

// This file and stimuli_*.go are the contract between the engine (the inner
// ring, package scheduler) and the outer ring (scheduler/server) that owns
// sockets, clocks and the materializer helpers. The outer ring decodes wire
// messages into these typed stimuli once, at the edge (a malformed field is
// refused there, with an error to the peer), calls State.Handle on its
// single engine goroutine, and sends the returned Outbox (outbox.go). The
// engine never reads a wire value: what it only relays (a run_spec, a
// dataset, an exception) is carried opaque. Field names follow the wire ops
// they come from; stimuli_worker.go, stimuli_client.go, stimuli_helper.go,
// stimuli_shuffle.go and stimuli_tick.go group them by who sends them, and
// coordination.go carries the coordination extensions' ops (scheduler/coord).

// Stimulus is one input to the engine.
type Stimulus interface {
	base() *Base
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
