package comm

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"daskgo/protocol"
)

// chunky returns its data a few bytes per Read, and with the last bytes
// an error (as io.Reader allows).
type chunky struct {
	data []byte
	step int
	err  error
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, c.err
	}
	n := copy(p, c.data[:min(c.step, len(c.data))])
	c.data = c.data[n:]
	if len(c.data) == 0 {
		return n, c.err
	}
	return n, nil
}

func TestConnReaderReadsEverythingThenTheError(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789"), 3000) // 30 kB: small and large reads
	boom := errors.New("boom")
	r := newConnReader(&chunky{data: want, step: 7000, err: boom}, nil)
	var got []byte
	for _, size := range []int{3, 5000, 20000, 16, 100000} {
		p := make([]byte, size)
		n, err := io.ReadAtLeast(r, p, min(size, len(want)-len(got)))
		got = append(got, p[:n]...)
		if err != nil {
			t.Fatalf("read of %d after %d bytes: %v", size, len(got), err)
		}
		if len(got) == len(want) {
			break
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d written in order", len(got), len(want))
	}
	if r.bp != nil || r.Buffered() != 0 {
		t.Fatalf("all read, yet a buffer is held (%d bytes buffered)", r.Buffered())
	}
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, boom) {
		t.Fatalf("after the data: %v, want the source's error", err)
	}
}

// A TCP Conn waiting for its next message holds neither read buffer nor
// scratch (readbuf.go), and reads the message that comes after the wait.
func TestWaitingConnHoldsNoReadBuffer(t *testing.T) {
	addr := testServer(t, identityServer())
	c := dial(t, addr)
	if c.raw == nil {
		t.Fatal("a TCP Conn without rawIO: this test checks the borrowing read of Linux TCP")
	}
	for i := range 3 {
		reply := mustCall(t, c, protocol.NewMap("op", "identity"))
		if m, ok := reply.(*protocol.Map); !ok || m.Len() == 0 {
			t.Fatalf("call %d: %v", i, reply)
		}
		if c.r.bp != nil || c.rscratch != nil {
			t.Fatalf("after call %d the Conn holds a read buffer (%v) or scratch (%v)", i, c.r.bp != nil, c.rscratch != nil)
		}
	}

	// a reader parked on an idle socket until its deadline: it held no
	// buffer while parked, and reads what comes after
	sc, cc := tcpPair(t) // handshaken
	_ = sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if err := sc.r.wait(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("wait on an idle socket: %v, want the deadline", err)
	}
	if sc.r.raw.rbp != nil || sc.r.bp != nil {
		t.Fatal("a reader that parked on an idle socket holds a borrowed buffer")
	}
	_ = sc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := cc.nc.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 5)
	if _, err := io.ReadFull(sc.r, p); err != nil || string(p) != "hello" {
		t.Fatalf("read %q, %v", p, err)
	}
}
