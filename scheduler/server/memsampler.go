package server

import (
	"context"
	"math"
	"strings"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// The MemorySampler's RPCs (MemorySamplerExtension.start and stop, behind
// distributed.diagnostics.MemorySampler.sample). The engine keeps the
// series (scheduler/memsampler.go); here each running sample has one
// goroutine that sends MemorySample at the client's interval, started by
// memory_sampler_start and ending when the engine answers that the sample
// is gone (stopped, or its client left) or the server stops. No sample,
// no goroutine and no timer.

// memorySamplerStart is MemorySamplerExtension.start: the key of the new
// sample, after its first point.
func (s *Server) memorySamplerStart(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	client, measure, interval := f.str("client"), f.str("measure"), f.float("interval")
	if f.err != nil {
		return nil, f.err
	}
	if _, ok := (scheduler.MemoryState{}).Measure(measure); !ok {
		return pyError("AttributeError", "'MemoryState' object has no attribute %q (measures: %s)",
			measure, strings.Join(scheduler.MemoryMeasures, ", ")), nil
	}
	if !(interval > 0) || math.IsInf(interval, 1) {
		// tornado's PeriodicCallback refuses it
		return pyError("ValueError", "Periodic callback must have a positive callback_time (interval=%v)", interval), nil
	}
	key := newUUID()
	if _, err := s.loop.call(ctx, func(id int64) scheduler.Stimulus {
		return &scheduler.MemorySamplerStart{Base: s.base("memory-sampler-start"), Key: key, Client: client,
			Measure: measure, ReplyTo: id}
	}); err != nil {
		return nil, err
	}
	every := max(time.Duration(interval*float64(time.Second)), time.Millisecond)
	s.goRun(func() { s.runMemorySampler(key, every) })
	return key, nil
}

// runMemorySampler sends MemorySample every interval until the sample is
// gone or the server stops.
func (s *Server) runMemorySampler(key string, every time.Duration) {
	t := s.clock.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C():
			alive, err := s.loop.call(s.ctx, func(id int64) scheduler.Stimulus {
				return &scheduler.MemorySample{Base: s.base("memory-sample"), Key: key, ReplyTo: id}
			})
			if ok, _ := alive.(bool); err != nil || !ok {
				return
			}
		}
	}
}

// memorySamplerStop is MemorySamplerExtension.stop: [(unix time, bytes)].
func (s *Server) memorySamplerStop(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	key := f.str("key")
	if f.err != nil {
		return nil, f.err
	}
	v, err := s.loop.call(ctx, func(id int64) scheduler.Stimulus {
		return &scheduler.MemorySamplerStop{Base: s.base("memory-sampler-stop"), Key: key, ReplyTo: id}
	})
	if err != nil {
		return nil, err
	}
	points, ok := v.([]scheduler.MemoryPoint)
	if !ok {
		return rpcResult(v), nil
	}
	out := make([]any, len(points))
	for i, p := range points {
		out[i] = []any{p.At, p.Bytes}
	}
	return out, nil
}

// heartbeatMemory reads a decoded heartbeat's memory figures: nil unless
// metrics has memory and spilled_bytes' memory and disk, all ints.
func heartbeatMemory(metrics *protocol.Map) *scheduler.HeartbeatMemory {
	process, ok1 := metrics.Get("memory").(int64)
	spilledMem, ok2 := lookupPath(metrics, "spilled_bytes", "memory").(int64)
	spilledDisk, ok3 := lookupPath(metrics, "spilled_bytes", "disk").(int64)
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	return &scheduler.HeartbeatMemory{Process: process, SpilledMemory: spilledMem, SpilledDisk: spilledDisk}
}
