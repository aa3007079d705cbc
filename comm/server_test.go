package comm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"daskgo/protocol"
)

func TestServerRPC(t *testing.T) {
	addr := testServer(t, identityServer())
	c := dial(t, addr)
	if m, ok := mustCall(t, c, protocol.NewMap("op", "identity", "reply", true)).(*protocol.Map); !ok || m.Get("id") != "Test-1" {
		t.Fatal("bad identity reply")
	}
	payload := []any{"x", int64(1), []byte{0, 255}}
	if got := mustCall(t, c, protocol.NewMap("op", "echo", "data", payload)); protocol.String(got) != protocol.String(payload) {
		t.Fatalf("echo returned %s", protocol.String(got))
	}
	if got := mustCall(t, c, protocol.NewMap("op", "echo")); got != nil {
		t.Fatalf("echo without data returned %s, want None", protocol.String(got))
	}
	if got := mustCall(t, c, protocol.NewMap("op", "typed", "n", int64(41))); got != int64(42) {
		t.Fatalf("typed returned %s", protocol.String(got))
	}
}

// reply=false gets no reply: the next reply on the connection is the next request's.
func TestServerReplyFalse(t *testing.T) {
	addr := testServer(t, identityServer())
	c := dial(t, addr)
	if err := c.Write(protocol.NewMap("op", "echo", "data", "first", "reply", false)); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(protocol.NewMap("op", "nonexistent", "reply", false)); err != nil {
		t.Fatal(err)
	}
	if got := mustCall(t, c, protocol.NewMap("op", "echo", "data", "second")); got != "second" {
		t.Fatalf("got %s, want the second request's reply", protocol.String(got))
	}
}

func TestServerCloseOps(t *testing.T) {
	addr := testServer(t, identityServer())
	for name, req := range map[string]*protocol.Map{
		"op close":         protocol.NewMap("op", "close", "reply", true),
		"close after echo": protocol.NewMap("op", "echo", "data", "OK", "close", true),
	} {
		t.Run(name, func(t *testing.T) {
			nc := rawConn(t, addr, true)
			writeMsg(t, nc, req)
			got := readUntilEOF(t, nc)
			if len(got) != 1 || got[0] != "OK" {
				t.Fatalf("got %v, want one \"OK\" then EOF", got)
			}
		})
	}
	nc := rawConn(t, addr, true)
	writeMsg(t, nc, protocol.NewMap("op", "close", "reply", false))
	if got := readUntilEOF(t, nc); len(got) != 0 {
		t.Fatalf("close with reply=false replied %v", got)
	}
	checkIdentity(t, addr)
}

// Each bad input closes that connection (after an error reply when the
// request was readable) or, for a well-formed request the server cannot
// serve, replies an error and keeps the connection; another client is
// served all along.
func TestServerBadInput(t *testing.T) {
	s := identityServer()
	s.IdleTimeout = 300 * time.Millisecond // so a peer stalling mid-frame is reaped
	addr := testServer(t, s)
	cases := []struct {
		name      string
		handshake bool
		send      [][]byte
		halfClose bool
		errReply  string // substring of the error reply; "" = no reply expected
		stays     bool   // connection stays usable
	}{
		{name: "garbage instead of handshake", send: [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")}},
		{name: "garbage", handshake: true, send: [][]byte{[]byte("\xde\xad\xbe\xef this is not a frame header at all")}},
		{name: "frame of 2^60 bytes", handshake: true, send: [][]byte{header(1, 1<<60)}},
		{name: "2^40 frames", handshake: true, send: [][]byte{header(1 << 40)}},
		{name: "zero frames", handshake: true, send: [][]byte{header(0)}},
		{name: "truncated frame then EOF", handshake: true, send: [][]byte{header(1, 100), []byte("ten bytes!")}, halfClose: true},
		{name: "peer stops mid-frame", handshake: true, send: [][]byte{header(1, 100), []byte("ten bytes!")}},
		{name: "peer stops mid-header", handshake: true, send: [][]byte{header(3, 1, 1, 1)[:20]}},
		{name: "invalid msgpack", handshake: true, send: [][]byte{header(1, 1), {0xc1}}, errReply: "malformed"},
		{name: "trailing bytes", handshake: true, send: [][]byte{header(1, 2), {0xc0, 0xc0}}, errReply: "malformed"},
		{name: "non-dict request", handshake: true, send: [][]byte{header(1, 3), {0x92, 0x01, 0x02}}, errReply: "expected a dict"},
		{name: "no op", handshake: true, send: msgBytes(protocol.NewMap("x", int64(1))), errReply: "without 'op'"},
		{name: "op not a str", handshake: true, send: msgBytes(protocol.NewMap("op", int64(5))), errReply: "not a str"},
		{name: "reply not a bool", handshake: true, send: msgBytes(protocol.NewMap("op", "echo", "reply", "yes")), errReply: "not a bool"},
		{name: "handler panics", handshake: true, send: msgBytes(protocol.NewMap("op", "boom")), errReply: "internal error"},
		{name: "unknown op", handshake: true, send: msgBytes(protocol.NewMap("op", "no-such-op")), errReply: `"no-such-op"`, stays: true},
		{name: "wrong argument type", handshake: true, send: msgBytes(protocol.NewMap("op", "typed", "n", "x")), errReply: "n must be an int", stays: true},
		{name: "unencodable reply", handshake: true, send: msgBytes(protocol.NewMap("op", "unencodable")), errReply: "cannot encode", stays: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := rawConn(t, addr, tc.handshake)
			for _, b := range tc.send {
				if _, err := nc.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			if tc.halfClose {
				_ = nc.CloseWrite()
			}
			if tc.stays {
				frames, err := protocol.ReadFrames(nc, protocol.DefaultLimits)
				if err != nil {
					t.Fatal(err)
				}
				reply, _ := protocol.Decode(frames)
				if text, ok := isUncaughtError(reply); !ok || !strings.Contains(text, tc.errReply) {
					t.Fatalf("reply %s; want an uncaught-error containing %q", protocol.String(reply), tc.errReply)
				}
				writeMsg(t, nc, protocol.NewMap("op", "echo", "data", "still here"))
				frames, err = protocol.ReadFrames(nc, protocol.DefaultLimits)
				if err != nil {
					t.Fatalf("connection did not stay usable: %v", err)
				}
				if v, _ := protocol.Decode(frames); v != "still here" {
					t.Fatalf("echo after error returned %s", protocol.String(v))
				}
			} else {
				got := readUntilEOF(t, nc)
				if tc.handshake && tc.errReply == "" && len(got) != 0 {
					t.Fatalf("expected a plain close, got %v", got)
				}
				if tc.errReply != "" {
					if len(got) != 1 {
						t.Fatalf("got %d messages before close, want one error reply", len(got))
					}
					if text, ok := isUncaughtError(got[0]); !ok || !strings.Contains(text, tc.errReply) {
						t.Fatalf("reply %s; want an uncaught-error containing %q", protocol.String(got[0]), tc.errReply)
					}
				}
			}
			checkIdentity(t, addr)
		})
	}
}

func msgBytes(msg any) [][]byte {
	frames, err := protocol.Encode(msg, nil)
	if err != nil {
		panic(err)
	}
	return append([][]byte{protocol.FramesHeader(frames)}, frames...)
}

// A handler takes over the connection as a stream: it writes its own
// reply, then reads batches until close-stream, answering through a
// BatchedSend; the server writes nothing itself and closes afterwards.
func TestServerTakeOver(t *testing.T) {
	s := identityServer()
	s.Handlers["register-stream"] = func(ctx context.Context, req *Request) (any, error) {
		c := req.TakeOver()
		if err := c.Write(protocol.NewMap("status", "OK")); err != nil {
			return nil, err
		}
		bs := NewBatchedSend(c, time.Millisecond, nil)
		defer bs.Close(context.Background())
		for {
			msgs, err := c.Read()
			if err != nil {
				return nil, err
			}
			for _, m := range msgs.([]any) {
				op := m.(*protocol.Map).Get("op")
				if op == "close-stream" {
					return nil, nil
				}
				if err := bs.Send(protocol.NewMap("op", "ack", "of", op)); err != nil {
					return nil, err
				}
			}
		}
	}
	addr := testServer(t, s)
	c := dial(t, addr)
	if err := c.Write(protocol.NewMap("op", "register-stream", "reply", false)); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Read(); err != nil || v.(*protocol.Map).Get("status") != "OK" {
		t.Fatalf("registration reply %v %v", v, err)
	}
	if err := c.Write([]any{protocol.NewMap("op", "a"), protocol.NewMap("op", "b")}); err != nil {
		t.Fatal(err)
	}
	var acks []any
	for len(acks) < 2 {
		v, err := c.Read()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range v.([]any) {
			acks = append(acks, m.(*protocol.Map).Get("of"))
		}
	}
	if acks[0] != "a" || acks[1] != "b" {
		t.Fatalf("acks %v", acks)
	}
	if err := c.Write([]any{protocol.NewMap("op", "close-stream")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close-stream: %v, want the server to close", err)
	}
}

// Shutdown closes idle connections, cancels stream handlers, waits for
// them, and makes Serve return ErrServerClosed (checked in testServer).
func TestServerShutdown(t *testing.T) {
	s := identityServer()
	streaming := make(chan struct{})
	s.Handlers["stream"] = func(ctx context.Context, req *Request) (any, error) {
		req.TakeOver()
		close(streaming)
		<-ctx.Done()
		return nil, nil
	}
	l, err := Listen(context.Background(), "tcp://127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	idle := dial(t, l.Addr())
	mustCall(t, idle, protocol.NewMap("op", "identity"))
	stream := dial(t, l.Addr())
	if err := stream.Write(protocol.NewMap("op", "stream", "reply", false)); err != nil {
		t.Fatal(err)
	}
	<-streaming
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	for _, c := range []*Conn{idle, stream} {
		if _, err := c.Read(); !errors.Is(err, ErrClosed) {
			t.Fatalf("read after shutdown: %v", err)
		}
	}
	if _, err := Dial(context.Background(), l.Addr(), &Options{HandshakeTimeout: 5 * time.Second}); err == nil {
		t.Fatal("dial after shutdown succeeded")
	}
}

// Server.Options limits apply to accepted connections.
func TestServerOptionsLimits(t *testing.T) {
	s := identityServer()
	s.Options = &Options{Limits: protocol.Limits{MaxFrames: 2, MaxMessageBytes: 64}}
	addr := testServer(t, s)
	nc := rawConn(t, addr, true)
	writeMsg(t, nc, protocol.NewMap("op", "echo", "data", strings.Repeat("x", 100)))
	if got := readUntilEOF(t, nc); len(got) != 0 {
		t.Fatalf("oversized request got %v, want a close", got)
	}
	checkIdentity(t, addr)
}
