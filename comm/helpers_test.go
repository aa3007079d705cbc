package comm

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"daskgo/protocol"
)

// testServer serves handlers on a loopback port until the test ends.
func testServer(t *testing.T, s *Server) string {
	t.Helper()
	l, err := Listen(context.Background(), "tcp://127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return l.Addr()
}

// identityServer is a Server with identity/echo handlers and a few that
// misbehave on purpose.
func identityServer() *Server {
	return &Server{
		Name: "test-server",
		Handlers: map[string]Handler{
			"identity": func(context.Context, *Request) (any, error) {
				return protocol.NewMap("type", "Test", "id", "Test-1"), nil
			},
			"echo": Echo,
			"boom": func(context.Context, *Request) (any, error) { panic("boom") },
			"unencodable": func(context.Context, *Request) (any, error) {
				return struct{}{}, nil
			},
			"typed": func(_ context.Context, req *Request) (any, error) {
				n, ok := req.Args.Get("n").(int64)
				if !ok {
					return nil, errors.New("typed: n must be an int")
				}
				return n + 1, nil
			},
		},
	}
}

func dial(t *testing.T, addr string) *Conn {
	t.Helper()
	c, err := Dial(context.Background(), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mustCall(t *testing.T, c *Conn, msg any) any {
	t.Helper()
	reply, err := c.Call(context.Background(), msg)
	if err != nil {
		t.Fatalf("call %s: %v", protocol.String(msg), err)
	}
	return reply
}

// checkIdentity shows that the server at addr still serves a new client.
func checkIdentity(t *testing.T, addr string) {
	t.Helper()
	reply := mustCall(t, dial(t, addr), protocol.NewMap("op", "identity", "reply", true))
	if m, ok := reply.(*protocol.Map); !ok || m.Get("type") != "Test" {
		t.Fatalf("identity reply %s", protocol.String(reply))
	}
}

// rawConn is a TCP connection that has done the handshake by hand, for
// sending bytes no well-behaved Conn would.
func rawConn(t *testing.T, addr string, handshake bool) *net.TCPConn {
	t.Helper()
	_, hostport, _ := ParseAddress(addr)
	nc, err := net.Dial("tcp", hostport)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second)) // a hang fails the test, not CI
	if handshake {
		writeMsg(t, nc, Handshake{Python: DefaultPython, PickleProtocol: 5}.message())
		if _, err := protocol.ReadFrames(nc, protocol.DefaultLimits); err != nil {
			t.Fatalf("read server handshake: %v", err)
		}
	}
	return nc.(*net.TCPConn)
}

func writeMsg(t *testing.T, w io.Writer, msg any) {
	t.Helper()
	frames, err := protocol.Encode(msg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.WriteFrames(w, frames); err != nil {
		t.Fatal(err)
	}
}

// header builds a frame prelude with arbitrary (possibly absurd) values.
func header(nframes uint64, lens ...uint64) []byte {
	b := make([]byte, 16+8*len(lens))
	total := uint64(len(b) - 8)
	for i, l := range lens {
		binary.LittleEndian.PutUint64(b[16+8*i:], l)
		total += l
	}
	binary.LittleEndian.PutUint64(b, total)
	binary.LittleEndian.PutUint64(b[8:], nframes)
	return b
}

// readUntilEOF returns the decoded messages the server sent before closing.
func readUntilEOF(t *testing.T, r io.Reader) []any {
	t.Helper()
	var out []any
	for {
		frames, err := protocol.ReadFrames(r, protocol.DefaultLimits)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("server neither replied nor closed: %v", err)
			}
			return out
		}
		v, err := protocol.Decode(frames)
		if err != nil {
			t.Fatalf("server sent undecodable message: %v", err)
		}
		out = append(out, v)
	}
}

// pipePair is two handshaken Conns over a synchronous in-memory pipe.
func pipePair(t *testing.T, a, b *Options) (*Conn, *Conn) {
	t.Helper()
	x, y := net.Pipe()
	ca, cb := NewConn(x, a), NewConn(y, b)
	t.Cleanup(func() { ca.Close(); cb.Close() })
	handshakeBoth(t, ca, cb)
	return ca, cb
}

// handshakeBoth runs the two ends' handshakes at once, as peers do.
func handshakeBoth(t *testing.T, ca, cb *Conn) {
	t.Helper()
	var wg sync.WaitGroup
	var errA, errB error
	wg.Add(2)
	go func() { defer wg.Done(); errA = ca.Handshake(context.Background()) }()
	go func() { defer wg.Done(); errB = cb.Handshake(context.Background()) }()
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("handshake: %v / %v", errA, errB)
	}
}

func isUncaughtError(v any) (string, bool) {
	e := AsRemoteError(v)
	if e == nil {
		return "", false
	}
	return e.ExceptionText, true
}
