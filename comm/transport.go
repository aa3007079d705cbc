package comm

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"

	"daskgo/protocol"
)

// Defaults follow distributed/distributed.yaml where it has one.
const (
	// DefaultTCPTimeout is distributed.comm.timeouts.tcp: how long an
	// unresponsive peer (unacked data, unanswered keepalives) lives.
	DefaultTCPTimeout = 30 * time.Second
	// DefaultHandshakeTimeout is distributed.comm.timeouts.connect; it bounds
	// dialing plus the handshake exchange.
	DefaultHandshakeTimeout = 30 * time.Second
	// DefaultPickleProtocol is pickle.HIGHEST_PROTOCOL on Python 3.8+.
	DefaultPickleProtocol = 5
)

// DefaultPython is the interpreter version we announce in handshakes; peers
// store it but never use it for negotiation.
var DefaultPython = [3]int{3, 11, 7}

// Options configure connections (both dialed and accepted). The zero value,
// or nil, means the defaults. Options are read, never modified.
type Options struct {
	// Limits bound what a peer may make us read; zero means protocol.DefaultLimits.
	Limits protocol.Limits
	// Compression is the codec we announce ("" = none, "lz4"). As in
	// Comm.handshake_info it is replaced by none when the peer is on our host.
	Compression string
	// PickleProtocol announced in the handshake; 0 means 5. distributed's
	// scheduler announces 4 when it dials workers (handshake_overrides).
	PickleProtocol int
	// HandshakeTimeout bounds dial + handshake; 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// TCPTimeout sets keepalive and TCP_USER_TIMEOUT; 0 means
	// DefaultTCPTimeout, negative disables both.
	TCPTimeout time.Duration
	// Trace, if set, sees every message read or written (trace.go).
	Trace Trace
	// TLS is the role's TLS configuration, needed for tls:// addresses
	// (tls.go); nil: tls:// is refused.
	TLS *TLSConfig
	// RequireEncryption refuses tcp:// both ways, as
	// distributed.comm.require-encryption does (RequireEncryptionMixin).
	RequireEncryption bool
}

func (o *Options) limits() protocol.Limits {
	if o == nil || o.Limits.MaxFrames == 0 || o.Limits.MaxMessageBytes == 0 {
		return protocol.DefaultLimits
	}
	return o.Limits
}

func (o *Options) handshakeTimeout() time.Duration {
	if o == nil || o.HandshakeTimeout == 0 {
		return DefaultHandshakeTimeout
	}
	return o.HandshakeTimeout
}

func (o *Options) tcpTimeout() time.Duration {
	if o == nil || o.TCPTimeout == 0 {
		return DefaultTCPTimeout
	}
	return o.TCPTimeout
}

// Transport opens byte streams for one address scheme: "tcp", and "tls",
// which is TCP with crypto/tls on top (the TLS handshake itself runs in
// Conn.Handshake, in the connection's goroutine).
type Transport interface {
	Listen(ctx context.Context, hostport string, opts *Options) (net.Listener, error)
	Dial(ctx context.Context, hostport string, opts *Options) (net.Conn, error)
}

var transports = map[string]Transport{"tcp": tcpTransport{}, "tls": tlsTransport{}}

// checkScheme refuses what the options rule out, before any socket:
// tls:// without a TLS configuration, tcp:// when encryption is required.
func checkScheme(scheme, addr string, opts *Options) error {
	switch {
	case scheme == "tls" && (opts == nil || opts.TLS == nil):
		return fmt.Errorf("%s: tls:// needs a TLS configuration (distributed.comm.tls.*, or --tls-ca-file, --tls-cert, --tls-key)", addr)
	case scheme != "tls" && opts != nil && opts.RequireEncryption:
		return fmt.Errorf("encryption required by Dask configuration, refusing communication from/to %q", addr)
	}
	return nil
}

// Listener accepts connections on one address. Accept returns a *Conn whose
// handshake has not run yet (like crypto/tls): the caller runs
// Conn.Handshake in the connection's own goroutine, so one slow peer never
// stalls the accept loop.
type Listener interface {
	Accept() (*Conn, error)
	// Addr is the bound address as a URI, e.g. "tcp://127.0.0.1:8786".
	Addr() string
	Close() error
}

// ParseAddress splits "tcp://host:port" into scheme and host:port. An address
// without scheme is tcp, as in distributed.comm.addressing.parse_address.
func ParseAddress(addr string) (scheme, hostport string, err error) {
	scheme, hostport, found := strings.Cut(addr, "://")
	if !found {
		scheme, hostport = "tcp", addr
	}
	if _, ok := transports[scheme]; !ok {
		return "", "", fmt.Errorf("address %q: %w %q", addr, ErrUnsupportedScheme, scheme)
	}
	return scheme, hostport, nil
}

// URI formats a net.Addr as distributed does: "tcp://127.0.0.1:8786",
// "tcp://[::1]:8786".
func URI(scheme string, a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return scheme + "://" + net.JoinHostPort(ta.IP.String(), fmt.Sprint(ta.Port))
	}
	return scheme + "://" + a.String()
}

// Listen binds addr ("tcp://host:port"; empty host = all interfaces,
// port 0 = any free port).
func Listen(ctx context.Context, addr string, opts *Options) (Listener, error) {
	scheme, hostport, err := ParseAddress(addr)
	if err != nil {
		return nil, err
	}
	if err := checkScheme(scheme, addr, opts); err != nil {
		return nil, err
	}
	nl, err := transports[scheme].Listen(ctx, hostport, opts)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return &listener{nl: nl, scheme: scheme, opts: opts}, nil
}

// Dial connects to addr and completes the handshake before returning, within
// opts.HandshakeTimeout and ctx.
func Dial(ctx context.Context, addr string, opts *Options) (*Conn, error) {
	scheme, hostport, err := ParseAddress(addr)
	if err != nil {
		return nil, err
	}
	if err := checkScheme(scheme, addr, opts); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.handshakeTimeout())
	defer cancel()
	nc, err := transports[scheme].Dial(ctx, hostport, opts)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	c := newConn(nc, scheme, opts)
	if err := c.Handshake(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

type listener struct {
	nl     net.Listener
	scheme string
	opts   *Options
}

func (l *listener) Accept() (*Conn, error) {
	nc, err := l.nl.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		setTCPTimeout(tc, l.opts.tcpTimeout())
	}
	if l.scheme == "tls" {
		nc = tls.Server(rawNetConn(nc), l.opts.TLS.Server)
	}
	return newConn(nc, l.scheme, l.opts), nil
}

func (l *listener) Addr() string { return URI(l.scheme, l.nl.Addr()) }
func (l *listener) Close() error { return l.nl.Close() }

type tcpTransport struct{}

func (tcpTransport) Listen(ctx context.Context, hostport string, _ *Options) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", hostport)
}

func (tcpTransport) Dial(ctx context.Context, hostport string, opts *Options) (net.Conn, error) {
	d := net.Dialer{KeepAlive: -1} // set below, with distributed's parameters
	nc, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return nil, err
	}
	setTCPTimeout(nc.(*net.TCPConn), opts.tcpTimeout())
	return nc, nil
}

type tlsTransport struct{}

func (tlsTransport) Listen(ctx context.Context, hostport string, opts *Options) (net.Listener, error) {
	return tcpTransport{}.Listen(ctx, hostport, opts)
}

func (tlsTransport) Dial(ctx context.Context, hostport string, opts *Options) (net.Conn, error) {
	nc, err := tcpTransport{}.Dial(ctx, hostport, opts)
	if err != nil {
		return nil, err
	}
	return tls.Client(rawNetConn(nc), opts.TLS.Client), nil
}

// rawTCPConn is a TCP connection read and written with raw system calls
// (rawio_linux.go), for what a tls.Conn reads and writes beneath its
// records: TLS then skips the runtime's entersyscall/exitsyscall on every
// record as plain TCP does. Deadlines and Close are the TCPConn's.
// tls.Conn serializes its writes, which writeBuffers' scratch needs.
type rawTCPConn struct {
	*net.TCPConn
	raw *rawIO
}

// rawNetConn wraps nc where raw I/O is available (Linux TCP), else returns it.
func rawNetConn(nc net.Conn) net.Conn {
	raw := newRawIO(nc) // nil unless nc is a *net.TCPConn on Linux
	if raw == nil {
		return nc
	}
	return &rawTCPConn{TCPConn: nc.(*net.TCPConn), raw: raw}
}

func (c *rawTCPConn) Read(p []byte) (int, error) { return c.raw.Read(p) }

func (c *rawTCPConn) Write(p []byte) (int, error) {
	if err := c.raw.writeBuffers(net.Buffers{p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// setTCPTimeout mirrors distributed/comm/tcp.py: set_tcp_timeout: keepalive
// probes so that a silently vanished peer is noticed within timeout, and on
// Linux TCP_USER_TIMEOUT so that unacknowledged writes fail as well.
func setTCPTimeout(tc *net.TCPConn, timeout time.Duration) {
	if timeout < 0 {
		return
	}
	secs := int(timeout / time.Second)
	const nprobes = 10
	if secs < nprobes+1 {
		secs = nprobes + 1
	}
	idle := max(2, secs/4)
	interval := max(1, (secs-idle)/nprobes)
	idle = secs - interval*nprobes
	_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{
		Enable:   true,
		Idle:     time.Duration(idle) * time.Second,
		Interval: time.Duration(interval) * time.Second,
		Count:    nprobes,
	})
	setUserTimeout(tc, time.Duration(secs)*time.Second)
}

// ContactAddress turns a listen address into one peers can dial: an
// unspecified host (all interfaces) becomes this machine's outward IP, as
// distributed.utils.get_ip picks it, falling back to 127.0.0.1.
func ContactAddress(listenAddr string) string {
	scheme, hostport, err := ParseAddress(listenAddr)
	if err != nil {
		return listenAddr
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return listenAddr
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return listenAddr
	}
	return scheme + "://" + net.JoinHostPort(outwardIP(), port)
}

// outwardIP asks the routing table which local IP reaches the internet; a UDP
// "connect" sends no packet.
func outwardIP() string {
	c, err := net.Dial("udp", "8.8.8.8:80")
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	if ua, ok := c.LocalAddr().(*net.UDPAddr); ok && !ua.IP.IsUnspecified() {
		return ua.IP.String()
	}
	return "127.0.0.1"
}
