package comm

import (
	"fmt"
	"net"

	"daskgo/protocol"
)

// Inline writes: a BatchedSend writes from the goroutine that queued a
// message when no write is in flight, so that a reply costs no goroutine
// hand-off. That goroutine (the engine's) must never wait for a slow peer,
// so it writes only what the socket takes at once (TryWrite) and leaves the
// rest to the stream's writer goroutine (Pending.Finish), which may wait.

// CanTryWrite reports whether TryWrite can write without waiting: raw
// system calls on a TCP socket (rawio_linux.go). Elsewhere (TLS, net.Pipe)
// every write may block and belongs on a writer goroutine.
func (c *Conn) CanTryWrite() bool { return c.raw != nil }

// Pending is the part of a message TryWrite could not write at once. Until
// Finish returns, nothing else may be written to the Conn: the peer would
// read the two messages' bytes interleaved.
type Pending struct {
	c      *Conn
	msg    any
	frames [][]byte
	rest   net.Buffers
}

// TryWrite encodes msg and writes what the socket takes now, without
// waiting. It returns nil when all of it went out, or the rest to Finish.
// Only for a Conn that CanTryWrite. A failed write closes the Conn, as
// Write does.
func (c *Conn) TryWrite(msg any) (*Pending, error) {
	if err := c.ensureHandshake(); err != nil {
		return nil, err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed.Load() {
		return nil, fmt.Errorf("write to %s: %w", c.peerAddr, ErrClosed)
	}
	frames, err := c.encodeLocked(msg)
	if err != nil {
		return nil, err
	}
	bufs := protocol.FrameBuffers(frames)
	n, err := c.raw.tryWriteBuffers(bufs)
	if err != nil {
		c.enc.Release()
		c.Close()
		return nil, c.ioError("write to", err)
	}
	if rest := consumeBuffers(bufs, n); len(rest) > 0 {
		c.encHeld = true // the rest lies in enc's buffers
		return &Pending{c: c, msg: msg, frames: frames, rest: rest}, nil
	}
	c.trace('w', msg, frames)
	c.enc.Release()
	return nil, nil
}

// Finish writes the rest of the message, waiting for the socket as long as
// it takes (the Conn's deadlines and Close end the wait).
func (p *Pending) Finish() error {
	c := p.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	defer func() { c.encHeld = false; c.enc.Release() }()
	if c.closed.Load() {
		return fmt.Errorf("write to %s: %w", c.peerAddr, ErrClosed)
	}
	if err := c.raw.writeBuffers(p.rest); err != nil {
		c.Close()
		return c.ioError("write to", err)
	}
	c.trace('w', p.msg, p.frames)
	return nil
}

// consumeBuffers drops the first n bytes of bufs (net.Buffers' own consume
// is unexported).
func consumeBuffers(bufs net.Buffers, n int64) net.Buffers {
	for len(bufs) > 0 && n >= int64(len(bufs[0])) {
		n -= int64(len(bufs[0]))
		bufs = bufs[1:]
	}
	if n > 0 {
		bufs[0] = bufs[0][n:]
	}
	return bufs
}
