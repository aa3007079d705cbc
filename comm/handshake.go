package comm

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"daskgo/protocol"
)

// Handshake is what each side announces right after connecting
// (distributed/comm/core.py: Comm.handshake_info).
type Handshake struct {
	Compression    string // "" = None
	Python         [3]int
	PickleProtocol int
}

// message is the wire form: {"compression", "python", "pickle-protocol"}.
func (h Handshake) message() *protocol.Map {
	var compression any
	if h.Compression != "" {
		compression = h.Compression
	}
	py := []any{int64(h.Python[0]), int64(h.Python[1]), int64(h.Python[2])}
	return protocol.NewMap("compression", compression, "python", py, "pickle-protocol", int64(h.PickleProtocol))
}

// parseHandshake reads a peer's handshake. A missing "pickle-protocol" is the
// same failure as Comm.handshake_configuration's KeyError.
func parseHandshake(v any) (Handshake, error) {
	var h Handshake
	m, ok := v.(*protocol.Map)
	if !ok {
		return h, fmt.Errorf("%w: handshake is %s, not a dict", ErrHandshake, protocol.String(v))
	}
	pp, ok := m.Lookup("pickle-protocol")
	if !ok {
		return h, fmt.Errorf("%w: no \"pickle-protocol\": Your Dask versions may not be in sync. "+
			"Please ensure that you have the same version of dask and distributed on your client, "+
			"scheduler, and worker machines", ErrHandshake)
	}
	n, ok := pp.(int64)
	if !ok || n < 0 || n > 255 {
		return h, fmt.Errorf("%w: \"pickle-protocol\" is %s, not a small int", ErrHandshake, protocol.String(pp))
	}
	h.PickleProtocol = int(n)
	switch c := m.Get("compression").(type) {
	case nil:
	case string:
		h.Compression = c
	default:
		return h, fmt.Errorf("%w: \"compression\" is %s, not a str or None", ErrHandshake, protocol.String(c))
	}
	if py, ok := m.Get("python").([]any); ok && len(py) == 3 {
		for i, x := range py {
			if n, ok := x.(int64); ok {
				h.Python[i] = int(n)
			}
		}
	}
	return h, nil
}

// negotiate mirrors Comm.handshake_configuration: the lower pickle protocol,
// and compression only when both sides announced the same codec.
func negotiate(local, remote Handshake) (compression string, pickleProtocol int) {
	if local.Compression == remote.Compression {
		compression = local.Compression
	}
	return compression, min(local.PickleProtocol, remote.PickleProtocol)
}

func (c *Conn) localHandshake() Handshake {
	h := Handshake{Python: DefaultPython, PickleProtocol: DefaultPickleProtocol}
	if c.opts != nil {
		h.Compression = c.opts.Compression
		if c.opts.PickleProtocol != 0 {
			h.PickleProtocol = c.opts.PickleProtocol
		}
	}
	if c.sameHost() {
		h.Compression = "" // Comm.handshake_info: no compression to ourselves
	}
	return h
}

func (c *Conn) sameHost() bool {
	la, lok := c.nc.LocalAddr().(*net.TCPAddr)
	ra, rok := c.nc.RemoteAddr().(*net.TCPAddr)
	return !lok || !rok || la.IP.Equal(ra.IP)
}

// Handshake runs the symmetric exchange if it has not run yet: write ours,
// read theirs (both sides write first, so neither waits for the other). It
// is bounded by ctx and the handshake timeout. Safe to call more than once and
// from several goroutines; later calls return the first result.
func (c *Conn) Handshake(ctx context.Context) error {
	c.hsMu.Lock()
	defer c.hsMu.Unlock()
	if c.hsDone {
		return c.hsErr
	}
	c.hsDone = true
	c.hsErr = c.handshake(ctx)
	if c.hsErr != nil {
		c.Close()
	}
	return c.hsErr
}

func (c *Conn) handshake(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.handshakeTimeout())
	defer cancel()
	deadline, _ := ctx.Deadline()
	_ = c.nc.SetDeadline(deadline)
	stop := c.abortOn(ctx)
	defer func() {
		stop()
		_ = c.nc.SetDeadline(time.Time{})
	}()

	if tc, ok := c.nc.(*tls.Conn); ok {
		// TLS first, within the same deadline: a peer that never
		// completes it is closed after the connect timeout.
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS handshake with %s: %w", c.peerAddr, err)
		}
	}
	c.local = c.localHandshake()
	frames, err := protocol.Encode(c.local.message(), nil)
	if err != nil {
		return fmt.Errorf("handshake with %s: %w", c.peerAddr, err)
	}
	// Write while reading: over TCP the kernel buffers our few bytes, but a
	// synchronous transport (net.Pipe) would deadlock with both sides writing.
	wrote := make(chan error, 1)
	go func() { wrote <- c.writeFrames(frames) }()
	v, err := c.read()
	if err != nil {
		_ = c.nc.SetDeadline(time.Unix(1, 0)) // unblock the writer, then join it
		<-wrote
		return fmt.Errorf("handshake with %s: %w", c.peerAddr, err)
	}
	if err := <-wrote; err != nil {
		return fmt.Errorf("handshake with %s: %w", c.peerAddr, err)
	}
	if c.remote, err = parseHandshake(v); err != nil {
		return fmt.Errorf("handshake with %s: %w", c.peerAddr, err)
	}
	c.compression, c.pickleProtocol = negotiate(c.local, c.remote)
	return nil
}

// abortOn makes blocked I/O return when ctx ends, by moving the deadline to
// the past. The returned stop must be called once the I/O is over; it
// reports whether the abort fired, and returns only after it has finished,
// so a deadline the caller sets afterwards is never overwritten.
func (c *Conn) abortOn(ctx context.Context) (stop func() (aborted bool)) {
	done := make(chan struct{})
	cancel := context.AfterFunc(ctx, func() {
		_ = c.nc.SetDeadline(time.Unix(1, 0))
		close(done)
	})
	return func() bool {
		if cancel() {
			return false
		}
		<-done
		return true
	}
}
