package comm

import "time"

// Trace is told of every message a Conn reads (dir 'r', once decoded) or
// writes (dir 'w', once written), with its size on the wire (frames and
// header) and the time it happened. It exists for the round-trip profile
// (scripts/bench/roundtrip_profile.py), which lines these times up with the
// peers' own, and for the per-message floor (scripts/bench/msgfloor.py),
// which replays the sizes; nil, the default, costs one pointer test per
// message. It runs on the reading or writing goroutine: it must be
// quick and must not keep msg, whose blobs alias reused buffers.
type Trace func(dir byte, c *Conn, msg any, size int, at time.Time)

func (c *Conn) trace(dir byte, msg any, frames [][]byte) {
	if c.opts != nil && c.opts.Trace != nil {
		size := 16 + 8*len(frames) // protocol.FramesHeader
		for _, f := range frames {
			size += len(f)
		}
		c.opts.Trace(dir, c, msg, size, time.Now())
	}
}
