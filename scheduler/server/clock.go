package server

import "time"

// Clock is the outer ring's time source. Every stimulus the engine sees is
// stamped with Now (the engine itself has no clock), and every wait of the
// outer ring (the periodic ticks, RPC timeouts, polls for a key or a
// worker) is made with After or NewTicker, so that a test can drive time.
// Config.Clock; the default is the wall clock.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
	NewTicker(d time.Duration) Ticker
}

// Ticker is time.Ticker behind Clock.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (wallClock) NewTicker(d time.Duration) Ticker       { return wallTicker{time.NewTicker(d)} }

type wallTicker struct{ t *time.Ticker }

func (w wallTicker) C() <-chan time.Time { return w.t.C }
func (w wallTicker) Stop()               { w.t.Stop() }
