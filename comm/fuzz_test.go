package comm

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"daskgo/protocol"
)

// FuzzServeConn feeds arbitrary bytes after a valid handshake to one server
// connection. Whatever arrives, the server must neither panic nor hang: it
// ends by closing the connection once the input is exhausted, and
// everything it wrote back is well-framed.
func FuzzServeConn(f *testing.F) {
	for _, seed := range []any{
		protocol.NewMap("op", "identity", "reply", true),
		protocol.NewMap("op", "echo", "data", []any{"x", int64(1), []byte("b")}),
		protocol.NewMap("op", "no-such-op"),
		protocol.NewMap("op", "close", "reply", false),
		[]any{int64(1), "x"},
	} {
		frames, _ := protocol.Encode(seed, nil)
		var buf bytes.Buffer
		_ = protocol.WriteFrames(&buf, frames)
		f.Add(buf.Bytes())
	}
	f.Add(header(1, 1<<60))
	f.Add(append(header(1, 1), 0xc1))
	f.Fuzz(func(t *testing.T, input []byte) {
		s := identityServer()
		opts := &Options{Limits: protocol.Limits{MaxFrames: 64, MaxMessageBytes: 1 << 16}}
		s.init()
		toServer, input0 := io.Pipe()
		output, fromServer := io.Pipe()
		sc := &serverConn{c: NewConn(&pipeConn{r: toServer, w: fromServer}, opts)}
		if !s.track(sc) {
			t.Fatal("track")
		}
		served := make(chan struct{})
		go func() {
			defer close(served)
			s.serveConn(sc)
		}()
		received := make(chan []byte)
		go func() {
			out, _ := io.ReadAll(output)
			received <- out
		}()
		frames, _ := protocol.Encode(Handshake{Python: DefaultPython, PickleProtocol: 5}.message(), nil)
		_ = protocol.WriteFrames(input0, frames)
		_, _ = input0.Write(input)
		input0.Close() // EOF: the server must finish
		<-served
		out := <-received
		r := bytes.NewReader(out)
		for r.Len() > 0 {
			if _, err := protocol.ReadFrames(r, protocol.DefaultLimits); err != nil {
				t.Fatalf("server wrote a malformed message: %v", err)
			}
		}
	})
}

// pipeConn is a net.Conn whose two directions close independently, so the
// fuzzer can end its input and still read everything the server wrote.
type pipeConn struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p *pipeConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeConn) Close() error {
	p.r.Close()
	return p.w.Close()
}
func (p *pipeConn) LocalAddr() net.Addr              { return pipeAddr{} }
func (p *pipeConn) RemoteAddr() net.Addr             { return pipeAddr{} }
func (p *pipeConn) SetDeadline(time.Time) error      { return nil }
func (p *pipeConn) SetReadDeadline(time.Time) error  { return nil }
func (p *pipeConn) SetWriteDeadline(time.Time) error { return nil }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
