package server

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// At --log-level trace the server logs, with a nanosecond wall-clock time,
// every message it reads or writes (and its size on the wire, which the
// per-message floor, scripts/bench/msgfloor, replays), each graph handed
// to the helper and back, and the engine's time per stimulus: one side of
// the stage-by-stage round-trip profile (scripts/bench/roundtrip_profile.py
// adds the client's and workers' side). Off, none of this runs.

// messageTrace returns the comm.Trace that logs messages, or nil when the
// logger would drop trace events.
func messageTrace(log zerolog.Logger) comm.Trace {
	if log.GetLevel() > zerolog.TraceLevel {
		return nil
	}
	return func(dir byte, c *comm.Conn, msg any, size int, at time.Time) {
		log.Trace().Str("dir", string(dir)).Str("peer", c.Peer()).Strs("ops", traceOps(msg)).
			Int("bytes", size).Int64("ns", at.UnixNano()).Msg("message")
	}
}

// traceOps names the ops of a message (a dict or a batch of dicts) with
// their key where they carry one; at most eight, then a count.
func traceOps(msg any) []string {
	items, ok := msg.([]any)
	if !ok {
		items = []any{msg}
	}
	var out []string
	for i, it := range items {
		if i == 8 {
			out = append(out, fmt.Sprintf("+%d more", len(items)-8))
			break
		}
		m, ok := it.(*protocol.Map)
		if !ok {
			out = append(out, protocol.String(it))
			continue
		}
		op, _ := m.Get("op").(string)
		if st, ok := m.Get("status").(string); ok && op == "" {
			op = "status:" + st
		}
		if k := m.Get("key"); k != nil {
			op += " " + traceKey(k)
		} else if ks := keyList(m.Get("keys")); len(ks) > 0 {
			op += " " + traceKey(ks[0])
		}
		out = append(out, op)
	}
	return out
}

func keyList(v any) []any {
	switch x := v.(type) {
	case []any:
		return x
	case protocol.Set:
		return x
	}
	return nil
}

// traceKey spells a key as Python's str() would for a string key.
func traceKey(k any) string {
	if s, ok := k.(string); ok {
		return s
	}
	return protocol.String(k)
}

// traceStimulus logs how long the engine took over one stimulus.
func traceStimulus(log zerolog.Logger, st scheduler.Stimulus, start, end time.Time) {
	log.Trace().Str("stimulus", fmt.Sprintf("%T", st)).Int64("ns", start.UnixNano()).
		Int64("engine_ns", end.Sub(start).Nanoseconds()).Msg("engine")
}
