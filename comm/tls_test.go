package comm

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"daskgo/protocol"
)

// testCA makes certificates for the TLS tests: a CA and leaves it signs.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// leaf returns PEM certificate and key valid from notBefore to notAfter,
// with no host name a peer could check (distributed does not check one).
func (ca *testCA) leaf(t testing.TB, notBefore, notAfter time.Time) (certPEM, keyPEM string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "dask peer"},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

func (ca *testCA) config(t testing.TB, mod func(*TLSSettings)) *TLSConfig {
	t.Helper()
	cert, key := ca.leaf(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	s := TLSSettings{CAFile: ca.pem, Cert: cert, Key: key}
	if mod != nil {
		mod(&s)
	}
	cfg, err := NewTLSConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// tlsServer serves identityServer on tls://127.0.0.1:0 with cfg.
func tlsServer(t *testing.T, cfg *TLSConfig, timeout time.Duration) string {
	t.Helper()
	opts := &Options{TLS: cfg, HandshakeTimeout: timeout}
	l, err := Listen(context.Background(), "tls://127.0.0.1:0", opts)
	if err != nil {
		t.Fatal(err)
	}
	s := identityServer()
	s.Options = opts
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return l.Addr()
}

func TestTLSMutualAuthenticationRoundTrip(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	addr := tlsServer(t, ca.config(t, nil), 5*time.Second)
	if !strings.HasPrefix(addr, "tls://127.0.0.1:") {
		t.Fatalf("listener address %q", addr)
	}
	c, err := Dial(context.Background(), addr, &Options{TLS: ca.config(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !strings.HasPrefix(c.Peer(), "tls://") {
		t.Errorf("peer %q", c.Peer())
	}
	reply := mustCall(t, c, protocol.NewMap("op", "echo", "data", []byte("over TLS"), "reply", true))
	if string(reply.([]byte)) != "over TLS" {
		t.Fatalf("echo %v", reply)
	}
}

// TestTLSRefusesWhatDistributedRefuses: each bad peer is refused at the
// handshake, the server keeps serving a good client, and nothing is left
// behind (goroutines back to their count).
func TestTLSRefusesWhatDistributedRefuses(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	other := newTestCA(t, "another CA")
	serverCfg := ca.config(t, func(s *TLSSettings) { s.MinVersion = tls.VersionTLS13 })
	addr := tlsServer(t, serverCfg, 500*time.Millisecond)
	hostport := strings.TrimPrefix(addr, "tls://")
	before := runtime.NumGoroutine()

	expired := func(s *TLSSettings) {
		s.Cert, s.Key = ca.leaf(t, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	}
	notYet := func(s *TLSSettings) {
		s.Cert, s.Key = ca.leaf(t, time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour))
	}
	bad := map[string]*TLSConfig{
		"certificate from another CA": other.config(t, func(s *TLSSettings) { s.CAFile = ca.pem }),
		"expired certificate":         ca.config(t, expired),
		"not yet valid certificate":   ca.config(t, notYet),
		"TLS 1.2 below the minimum":   ca.config(t, func(s *TLSSettings) { s.MaxVersion = tls.VersionTLS12 }),
	}
	noCert := ca.config(t, nil)
	noCert.Client = noCert.Client.Clone()
	noCert.Client.Certificates = nil
	bad["no client certificate"] = noCert
	for name, cfg := range bad {
		c, err := Dial(context.Background(), addr, &Options{TLS: cfg, HandshakeTimeout: 2 * time.Second})
		if err == nil {
			// TLS 1.3 clients learn of a refused certificate at their first read
			_, err = c.Call(context.Background(), protocol.NewMap("op", "identity", "reply", true))
			c.Close()
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// plain TCP speaking dask, garbage instead of a ClientHello, and a
	// peer that never finishes: each closed by the server
	for name, payload := range map[string][]byte{
		"plain dask handshake": append(header(1, 4), []byte{0x81, 0xa2, 'o', 'p'}...),
		"garbage":              []byte("\x16\x03\x01\xff\xffnot a client hello at all"),
		"silence":              nil,
	} {
		nc, err := net.Dial("tcp", hostport)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = nc.Write(payload)
		_ = nc.SetReadDeadline(time.Now().Add(3 * time.Second))
		buf := make([]byte, 1024)
		for {
			if _, err = nc.Read(buf); err != nil {
				break
			}
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: the server kept the connection open past the handshake timeout", name)
		}
		nc.Close()
	}
	// a good client still gets in
	c, err := Dial(context.Background(), addr, &Options{TLS: ca.config(t, nil)})
	if err != nil {
		t.Fatalf("good client after bad ones: %v", err)
	}
	mustCall(t, c, protocol.NewMap("op", "identity", "reply", true))
	c.Close()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after the bad peers, %d before", n, before)
	}
}

// TestTLSDialChecksTheCANotTheHostName: our outgoing connections (to
// workers) accept any name on a certificate from the CA and refuse a
// server certificate from another CA.
func TestTLSDialChecksTheCANotTheHostName(t *testing.T) {
	ca, other := newTestCA(t, "cluster CA"), newTestCA(t, "another CA")
	good := tlsServer(t, ca.config(t, nil), 5*time.Second)
	c, err := Dial(context.Background(), good, &Options{TLS: ca.config(t, nil)})
	if err != nil {
		t.Fatalf("certificate without our host name: %v", err)
	}
	c.Close()
	foreign := tlsServer(t, other.config(t, func(s *TLSSettings) { s.CAFile = ca.pem }), 5*time.Second)
	if c, err := Dial(context.Background(), foreign, &Options{TLS: ca.config(t, nil)}); err == nil {
		c.Close()
		t.Fatal("a server certificate from another CA was accepted")
	}
}

func TestRequireEncryptionRefusesPlainTCP(t *testing.T) {
	opts := &Options{RequireEncryption: true}
	if _, err := Listen(context.Background(), "tcp://127.0.0.1:0", opts); err == nil || !strings.Contains(err.Error(), "encryption required") {
		t.Errorf("listen: %v", err)
	}
	if _, err := Dial(context.Background(), "tcp://127.0.0.1:1", opts); err == nil || !strings.Contains(err.Error(), "encryption required") {
		t.Errorf("dial: %v", err)
	}
	if _, err := Listen(context.Background(), "tls://127.0.0.1:0", nil); err == nil || !strings.Contains(err.Error(), "TLS configuration") {
		t.Errorf("tls without configuration: %v", err)
	}
}

func TestTLSSettingsErrors(t *testing.T) {
	ca := newTestCA(t, "CA")
	cert, key := ca.leaf(t, time.Now(), time.Now().Add(time.Hour))
	for name, s := range map[string]TLSSettings{
		"no CA":        {Cert: cert, Key: key},
		"missing file": {CAFile: "/no/such/ca.pem", Cert: cert, Key: key},
		"not PEM":      {CAFile: "garbage\n", Cert: cert, Key: key},
		"wrong key":    {CAFile: ca.pem, Cert: cert, Key: ca.pem},
		"max < min":    {CAFile: ca.pem, Cert: cert, Key: key, MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS12},
	} {
		if _, err := NewTLSConfig(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// the key appended to the certificate, as distributed allows
	if _, err := NewTLSConfig(TLSSettings{CAFile: ca.pem, Cert: cert + key}); err != nil {
		t.Errorf("key in the certificate file: %v", err)
	}
	ids, err := ParseCiphers("ECDHE-RSA-AES128-GCM-SHA256:TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 TLS_AES_128_GCM_SHA256")
	if err != nil || len(ids) != 2 {
		t.Errorf("ciphers: %v %v", ids, err)
	}
	if _, err := ParseCiphers("HIGH:!aNULL"); err == nil || !strings.Contains(err.Error(), "HIGH") {
		t.Errorf("OpenSSL keywords: %v", err)
	}
	for v, want := range map[any]uint16{1.2: tls.VersionTLS12, 1.3: tls.VersionTLS13, nil: 0, "1.3": tls.VersionTLS13} {
		if got, err := TLSVersion(v); err != nil || got != want {
			t.Errorf("TLSVersion(%v) = %v, %v", v, got, err)
		}
	}
	if _, err := TLSVersion(1.1); err == nil {
		t.Error("TLS 1.1 accepted")
	}
}

// TestThousandStalledHandshakesDoNotBlockAGoodClient: handshakes run in
// each connection's goroutine, not the accept loop.
func TestThousandStalledHandshakesDoNotBlockAGoodClient(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	addr := tlsServer(t, ca.config(t, nil), 2*time.Second)
	hostport := strings.TrimPrefix(addr, "tls://")
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	for i := 0; i < 1000; i++ {
		nc, err := net.Dial("tcp", hostport)
		if err != nil {
			t.Fatalf("stalled connection %d: %v", i, err)
		}
		stalled = append(stalled, nc)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, &Options{TLS: ca.config(t, nil)})
	if err != nil {
		t.Fatalf("good client behind 1000 stalled handshakes: %v (after %v)", err, time.Since(start))
	}
	mustCall(t, c, protocol.NewMap("op", "identity", "reply", true))
	c.Close()
}

// clientHello records the first flight a Go TLS client sends.
func clientHello(t testing.TB, cfg *TLSConfig) []byte {
	a, b := net.Pipe()
	done := make(chan []byte)
	go func() {
		buf := make([]byte, 64<<10)
		n, _ := b.Read(buf)
		b.Close()
		done <- buf[:n]
	}()
	c := tls.Client(a, cfg.Client)
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	_ = c.Handshake()
	a.Close()
	return <-done
}

// FuzzTLSAccept feeds the server side of the TLS accept path garbage,
// truncated and mutated ClientHellos: the handshake ends with an error
// within its timeout, never a panic, a hang or a leaked goroutine.
func FuzzTLSAccept(f *testing.F) {
	ca := newTestCA(f, "fuzz CA")
	cfg := ca.config(f, nil)
	hello := clientHello(f, cfg)
	f.Add(hello)
	for _, n := range []int{1, 5, 6, 40, len(hello) / 2, len(hello) - 1} {
		if n < len(hello) {
			f.Add(hello[:n])
		}
	}
	f.Add([]byte("\x16\x03\x01\x00\x00"))
	f.Add([]byte("\x16\x03\x03\xff\xff"))
	f.Add(append(header(1, 4), 0x81, 0xa2, 'o', 'p'))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	opts := &Options{TLS: cfg, HandshakeTimeout: 200 * time.Millisecond}
	f.Fuzz(func(t *testing.T, input []byte) {
		// the peer's bytes, then EOF; what the server answers is dropped
		c := newConn(tls.Server(&replayConn{r: bytes.NewReader(input)}, cfg.Server), "tls", opts)
		start := time.Now()
		err := c.Handshake(context.Background())
		if err == nil {
			t.Fatalf("a handshake without a client certificate completed on input %x", input)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("handshake took %v", d)
		}
		c.Close()
	})
}

// replayConn is a peer that sends a fixed byte string and then closes.
type replayConn struct {
	pipeConn
	r *bytes.Reader
}

func (c *replayConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *replayConn) Write(b []byte) (int, error) { return len(b), nil }
func (c *replayConn) Close() error                { return nil }

// countingConn counts the Writes that reach the socket beneath TLS: one
// per record.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// A small message of several frames goes out as one TLS record (one
// system call); written frame by frame it took one per buffer, which made
// client.map over tls:// cost 1.6x its tcp:// CPU per task.
func TestTLSSmallMessageIsOneRecord(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	cfg := ca.config(t, nil)
	x, y := net.Pipe()
	counted := &countingConn{Conn: x}
	opts := &Options{TLS: cfg}
	a := newConn(tls.Client(counted, cfg.Client), "tls", opts)
	b := newConn(tls.Server(y, cfg.Server), "tls", opts)
	// the pipe first: a TLS close then fails at once instead of waiting
	// 5 s for a close_notify nobody reads
	t.Cleanup(func() { x.Close(); y.Close(); a.Close(); b.Close() })
	handshakeBoth(t, a, b)
	msg := protocol.NewMap("op", "task-finished", "key", "inc-1", "nbytes", 28,
		"blob", bytes.Repeat([]byte{7}, 1000)) // under a record's size while TLS sizes records dynamically
	for i := range 3 {
		before := counted.writes.Load()
		got := make(chan error, 1)
		go func() { _, err := b.Read(); got <- err }()
		if err := a.Write(msg); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if n := counted.writes.Load() - before; n != 1 {
			t.Fatalf("message %d took %d TLS records, want 1", i, n)
		}
	}
}
