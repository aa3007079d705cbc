package comm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"daskgo/protocol"
)

// Conn is one framed, handshaken connection to a dask peer
// (distributed/comm/tcp.py: TCP).
//
// Concurrency: one goroutine may read (Read/ReadFrames/Call) while any number
// write (Write/WriteFrames are serialised by a mutex, so frames of two
// messages never interleave). Close, deadlines, addresses and the handshake
// accessors are safe from any goroutine; Close unblocks a pending Read or
// Write.
type Conn struct {
	nc       net.Conn
	r        *connReader
	opts     *Options
	limits   protocol.Limits
	scheme   string
	peerAddr string
	selfAddr string

	hsMu           sync.Mutex
	hsDone         bool
	hsErr          error
	local, remote  Handshake
	compression    string
	pickleProtocol int

	raw       *rawIO  // reads and writes with raw system calls (Linux TCP); nil: use nc
	rscratch  *[]byte // the last scratch read into (frame 0 of a one-frame message), from scratchPool: Read gives it back after decoding, ReadTransient at the next read
	wmu       sync.Mutex
	enc       protocol.Encoder // guarded by wmu: reuses its buffers from message to message
	encHeld   bool             // guarded by wmu: a Pending write still holds enc's frames
	closed    atomic.Bool
	closeOnce sync.Once
}

// readBufferSize makes small messages (op dicts, batches) one read syscall.
const readBufferSize = 8 << 10 // 64 KiB a connection made 121 of 135 MB of heap at 1,000 workers: larger messages read past it

// readScratchSize is the largest one-frame message read without a buffer
// of its own (a stream batch of a few dozen ops).
const readScratchSize = 16 << 10

// NewConn wraps an established byte stream (a net.Pipe in tests, a TLS
// connection later). The handshake runs on the first Handshake call, or
// implicitly on first use.
func NewConn(nc net.Conn, opts *Options) *Conn { return newConn(nc, "tcp", opts) }

func newConn(nc net.Conn, scheme string, opts *Options) *Conn {
	raw := newRawIO(nc)
	var src io.Reader = nc
	if raw != nil {
		src = raw
	}
	return &Conn{
		nc:       nc,
		raw:      raw,
		r:        newConnReader(src, raw),
		opts:     opts,
		limits:   opts.limits(),
		scheme:   scheme,
		peerAddr: URI(scheme, nc.RemoteAddr()),
		selfAddr: URI(scheme, nc.LocalAddr()),
	}
}

// Peer is the peer's address, "tcp://127.0.0.1:54321".
func (c *Conn) Peer() string { return c.peerAddr }

// Local is our end's address.
func (c *Conn) Local() string { return c.selfAddr }

// PeerHandshake is what the peer announced (zero before the handshake).
func (c *Conn) PeerHandshake() Handshake {
	c.hsMu.Lock()
	defer c.hsMu.Unlock()
	return c.remote
}

// Negotiated returns the compression codec ("" = none) and pickle protocol
// agreed in the handshake.
func (c *Conn) Negotiated() (compression string, pickleProtocol int) {
	c.hsMu.Lock()
	defer c.hsMu.Unlock()
	return c.compression, c.pickleProtocol
}

func (c *Conn) ensureHandshake() error {
	c.hsMu.Lock()
	done, err := c.hsDone, c.hsErr
	c.hsMu.Unlock()
	if done {
		return err
	}
	return c.Handshake(context.Background())
}

// Read reads and decodes one message. Blobs in the value alias the frames
// read; nothing else holds them.
func (c *Conn) Read() (any, error) {
	if err := c.ensureHandshake(); err != nil {
		return nil, err
	}
	return c.read()
}

func (c *Conn) read() (any, error) {
	frames, err := c.readTransient()
	if err != nil {
		return nil, err
	}
	defer c.releaseScratch() // Decode copies what it keeps of frame 0
	v, err := protocol.Decode(frames)
	if err != nil {
		return nil, fmt.Errorf("read from %s: %w", c.peerAddr, err)
	}
	c.trace('r', v, frames)
	return v, nil
}

// ReadTransient reads one message's frames without decoding them, a
// one-frame message into a borrowed scratch: the frames are valid
// until the next read on this Conn (a stream reader that decodes each
// batch before the next, so a batch costs no buffer of its own). Tracing
// sees no message here: a
// traced Conn's reader uses Read (Tracing).
func (c *Conn) ReadTransient() ([][]byte, error) {
	if err := c.ensureHandshake(); err != nil {
		return nil, err
	}
	return c.readTransient()
}

// readTransient waits for bytes before it borrows the scratch, so that a
// waiting Conn holds no buffer (readbuf.go).
func (c *Conn) readTransient() ([][]byte, error) {
	c.releaseScratch()
	if err := c.r.wait(); err != nil {
		return nil, c.ioError("read from", err)
	}
	c.rscratch = scratchPool.Get().(*[]byte)
	frames, err := protocol.ReadFramesReusing(c.r, c.limits, *c.rscratch)
	if err != nil {
		c.releaseScratch()
		return nil, c.ioError("read from", err)
	}
	return frames, nil
}

// releaseScratch gives ReadTransient's scratch back: its frames are no
// longer valid.
func (c *Conn) releaseScratch() {
	if c.rscratch != nil {
		scratchPool.Put(c.rscratch)
		c.rscratch = nil
	}
}

// Tracing reports whether a Trace sees this Conn's messages.
func (c *Conn) Tracing() bool { return c.opts != nil && c.opts.Trace != nil }

// ReadFrames reads one message's frames without decoding them.
func (c *Conn) ReadFrames() ([][]byte, error) {
	if err := c.ensureHandshake(); err != nil {
		return nil, err
	}
	return c.readFrames()
}

func (c *Conn) readFrames() ([][]byte, error) {
	frames, err := protocol.ReadFrames(c.r, c.limits)
	if err != nil {
		return nil, c.ioError("read from", err)
	}
	return frames, nil
}

// Write encodes msg with the negotiated compression and writes it.
func (c *Conn) Write(msg any) error { return c.write(msg, nil) }

// WriteGated is Write with the encoding done holding gate (a channel of
// capacity n: at most n encodings at once), let go before the frames go to
// the socket, so that a slow peer holds no slot.
func (c *Conn) WriteGated(msg any, gate chan struct{}) error { return c.write(msg, gate) }

func (c *Conn) write(msg any, gate chan struct{}) error {
	if err := c.ensureHandshake(); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if gate != nil {
		gate <- struct{}{}
	}
	frames, err := c.encodeLocked(msg)
	if gate != nil {
		<-gate
	}
	if err != nil {
		return err
	}
	if err := c.writeFramesLocked(frames); err != nil {
		c.enc.Release()
		return err
	}
	c.trace('w', msg, frames)
	c.enc.Release()
	return nil
}

// encodeLocked encodes msg with the Conn's Encoder (wmu held: its buffers
// are free until the message is written, and Release follows the write).
// While a Pending write holds them (which its contract forbids from
// overlapping another write, but a stray one must not corrupt it), a
// one-off encoding is used.
func (c *Conn) encodeLocked(msg any) ([][]byte, error) {
	comp, _ := c.Negotiated()
	var frames [][]byte
	var err error
	if c.encHeld {
		frames, err = protocol.Encode(msg, &protocol.EncodeOptions{Compression: comp})
	} else {
		c.enc.Compression = comp
		frames, err = c.enc.Encode(msg)
	}
	if err != nil {
		return nil, fmt.Errorf("write to %s: %w", c.peerAddr, err)
	}
	return frames, nil
}

// WriteFrames writes one message made of frames.
func (c *Conn) WriteFrames(frames [][]byte) error {
	if err := c.ensureHandshake(); err != nil {
		return err
	}
	return c.writeFrames(frames)
}

// writeFrames closes the connection on failure: after a partial write the
// peer's reader is out of step and the stream cannot be used again.
func (c *Conn) writeFrames(frames [][]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeFramesLocked(frames)
}

func (c *Conn) writeFramesLocked(frames [][]byte) error {
	if c.closed.Load() {
		return fmt.Errorf("write to %s: %w", c.peerAddr, ErrClosed)
	}
	var err error
	if c.raw != nil {
		err = c.raw.writeBuffers(protocol.FrameBuffers(frames))
	} else {
		err = protocol.WriteFrames(c.nc, frames) // TLS: one record for a small message
	}
	if err != nil {
		c.Close()
		return c.ioError("write to", err)
	}
	return nil
}

// ioError wraps err with the peer address, mapping "closed" conditions onto
// ErrClosed: our own Close (net.ErrClosed, io.ErrClosedPipe) and the peer's
// clean close between messages (io.EOF). A close in the middle of a message
// stays io.ErrUnexpectedEOF: that is a truncated frame.
func (c *Conn) ioError(what string, err error) error {
	switch {
	case c.closed.Load() || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrClosedPipe):
		return fmt.Errorf("%s %s: %w", what, c.peerAddr, ErrClosed)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%s %s: %w (peer hung up: %w)", what, c.peerAddr, ErrClosed, err)
	}
	return fmt.Errorf("%s %s: %w", what, c.peerAddr, err)
}

// Close closes the connection. It is idempotent and unblocks Read/Write.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		err = c.nc.Close()
	})
	return err
}

// Closed reports whether Close has been called (by us, or after a failed write).
func (c *Conn) Closed() bool { return c.closed.Load() }

// PeerGone reports, without blocking or consuming input, whether the peer
// hung up while we owe it a reply: a blocked RPC (a Lock acquire, an Event
// wait) polls it so that its wait ends when the caller is gone, as the
// pool does for idle connections.
func (c *Conn) PeerGone() bool {
	return c.Closed() || (c.r.Buffered() == 0 && peerClosed(c.nc))
}

// SetDeadline, SetReadDeadline and SetWriteDeadline are net.Conn's.
func (c *Conn) SetDeadline(t time.Time) error      { return c.nc.SetDeadline(t) }
func (c *Conn) SetReadDeadline(t time.Time) error  { return c.nc.SetReadDeadline(t) }
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.nc.SetWriteDeadline(t) }

// Call is distributed's send_recv: write msg (a request dict with "op"),
// read exactly one reply, and turn an "uncaught-error" reply into a
// *RemoteError. ctx aborts the exchange; a connection aborted mid-exchange is
// closed, since the late reply would be taken for the next one.
func (c *Conn) Call(ctx context.Context, msg any) (any, error) {
	if err := c.ensureHandshake(); err != nil {
		return nil, err
	}
	stop := c.abortOn(ctx)
	reply, err := c.call(msg)
	if stop() {
		c.Close()
		_ = c.nc.SetDeadline(time.Time{})
		if err != nil {
			return nil, fmt.Errorf("call %s on %s: %w (%w)", opOf(msg), c.peerAddr, ctx.Err(), err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", opOf(msg), err)
	}
	return reply, nil
}

func (c *Conn) call(msg any) (any, error) {
	if err := c.Write(msg); err != nil {
		return nil, err
	}
	reply, err := c.read()
	if err != nil {
		return nil, err
	}
	if rerr := AsRemoteError(reply); rerr != nil {
		rerr.Op = opOf(msg)
		return reply, rerr
	}
	return reply, nil
}

func opOf(msg any) string {
	var op any
	switch m := msg.(type) {
	case *protocol.Map:
		op = m.Get("op")
	case map[string]any:
		op = m["op"]
	}
	if s, ok := op.(string); ok {
		return s
	}
	return "?"
}
