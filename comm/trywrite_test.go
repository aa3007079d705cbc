//go:build linux

package comm

import (
	"bytes"
	"context"
	"testing"
	"time"

	"daskgo/protocol"
)

// Linux only: TryWrite needs raw system calls (rawio_linux.go).

// tcpPair is two handshaken Conns over loopback TCP, which can TryWrite.
func tcpPair(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	l, err := Listen(context.Background(), "tcp://127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan *Conn, 1)
	acceptErr := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			err = c.Handshake(context.Background())
		}
		accepted <- c
		acceptErr <- err
	}()
	a, err := Dial(context.Background(), l.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := <-accepted
	if err := <-acceptErr; err != nil {
		a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func opMsg(i int) *protocol.Map { return protocol.NewMap("op", "m", "i", int64(i)) }

// Queue then Flush writes everything queued as one batch from the calling
// goroutine, in order, and counts it as inlined.
func TestFlushWritesInline(t *testing.T) {
	a, b := tcpPair(t)
	if !a.CanTryWrite() {
		t.Fatal("a TCP Conn cannot TryWrite")
	}
	bs := NewBatchedSend(a, 0, nil)
	for i := range 3 {
		if err := bs.Queue(opMsg(i)); err != nil {
			t.Fatal(err)
		}
	}
	bs.Flush()
	msgs, batches := readBatches(t, b, 3)
	if batches != 1 || bs.Inlined() != 1 {
		t.Fatalf("3 queued messages took %d batches, %d inlined; want 1 and 1", batches, bs.Inlined())
	}
	_ = bs.Queue(opMsg(3), opMsg(4))
	bs.Flush()
	more, _ := readBatches(t, b, 2)
	for i, m := range append(msgs, more...) {
		if got := m.(*protocol.Map).Get("i"); got != int64(i) {
			t.Fatalf("message %d has i=%v: order lost", i, got)
		}
	}
	if err := bs.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sent, nb := bs.Stats(); sent != 5 || nb != 2 || bs.Inlined() != 2 {
		t.Fatalf("stats %d/%d, %d inlined; want 5/2, 2", sent, nb, bs.Inlined())
	}
}

// A message larger than the socket takes at once does not hold Flush's
// caller: the writer goroutine finishes it once the peer reads, and what
// was queued meanwhile follows it in order.
func TestFlushLeavesTheRestToTheWriter(t *testing.T) {
	a, b := tcpPair(t)
	bs := NewBatchedSend(a, 0, nil)
	big := bytes.Repeat([]byte{7}, 64<<20) // far beyond any loopback send buffer
	_ = bs.Queue(protocol.NewMap("op", "big", "i", int64(0), "data", big))
	flushed := make(chan struct{})
	go func() {
		bs.Flush()
		_ = bs.Queue(opMsg(1))
		bs.Flush()
		close(flushed)
	}()
	select {
	case <-flushed: // nobody reads b yet: Flush did not wait for the peer
	case <-time.After(20 * time.Second):
		t.Fatal("Flush waited for a peer that does not read")
	}
	msgs, batches := readBatches(t, b, 2)
	if batches != 2 {
		t.Fatalf("%d batches, want 2 (the big one, then what queued behind it)", batches)
	}
	first := msgs[0].(*protocol.Map)
	if first.Get("i") != int64(0) || !bytes.Equal(first.Get("data").([]byte), big) || msgs[1].(*protocol.Map).Get("i") != int64(1) {
		t.Fatal("the big message arrived damaged or out of order")
	}
	if bs.Inlined() != 1 {
		t.Fatalf("%d inlined flushes, want 1 (the second waited for the writer)", bs.Inlined())
	}
	if err := bs.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Where the Conn cannot write without waiting (net.Pipe here; TLS in
// production) Flush hands the buffer to the writer goroutine.
func TestFlushWithoutTryWriteUsesTheWriter(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	bs := NewBatchedSend(a, 0, nil)
	_ = bs.Queue(opMsg(0), opMsg(1))
	bs.Flush()
	if _, batches := readBatches(t, b, 2); batches != 1 || bs.Inlined() != 0 {
		t.Fatalf("%d batches, %d inlined; want 1 and 0", batches, bs.Inlined())
	}
	if err := bs.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Close waits for what is queued, and an aborted stream refuses Queue.
func TestQueueAfterCloseFails(t *testing.T) {
	a, b := tcpPair(t)
	bs := NewBatchedSend(a, 0, nil)
	_ = bs.Queue(opMsg(0))
	if err := bs.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := readBatches(t, b, 1); len(msgs) != 1 {
		t.Fatalf("%d messages after Close, want the queued one", len(msgs))
	}
	if err := bs.Queue(opMsg(1)); err == nil {
		t.Fatal("Queue after Close succeeded")
	}
}
