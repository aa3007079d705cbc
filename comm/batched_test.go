package comm

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"daskgo/protocol"
)

// readBatches reads batches from c until n messages have arrived.
func readBatches(t *testing.T, c *Conn, n int) (msgs []any, batches int) {
	t.Helper()
	for len(msgs) < n {
		v, err := c.Read()
		if err != nil {
			t.Fatalf("after %d messages: %v", len(msgs), err)
		}
		batch, ok := v.([]any)
		if !ok {
			t.Fatalf("batch is %s, not a list", protocol.String(v))
		}
		msgs = append(msgs, batch...)
		batches++
	}
	return msgs, batches
}

// net.Pipe is synchronous: the first flush blocks until the reader starts,
// so everything sent meanwhile must coalesce into (at most) one more batch.
func TestBatchedCoalescesInOrder(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	bs := NewBatchedSend(a, 0, nil)
	const n = 200
	for i := range n {
		if err := bs.Send(protocol.NewMap("op", "m", "i", int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	msgs, batches := readBatches(t, b, n)
	if batches > 2 {
		t.Fatalf("%d messages took %d batches; want at most 2", n, batches)
	}
	for i, m := range msgs {
		if got := m.(*protocol.Map).Get("i"); got != int64(i) {
			t.Fatalf("message %d has i=%v: order lost", i, got)
		}
	}
	if err := bs.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sent, nb := bs.Stats(); sent != n || nb != batches {
		t.Fatalf("stats %d/%d, want %d/%d", sent, nb, n, batches)
	}
}

// Blobs of all messages in a batch share the batch's frame list.
func TestBatchedBlobsShareFrames(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	bs := NewBatchedSend(a, 0, nil)
	blob := func(s string) *protocol.Blob {
		return &protocol.Blob{Header: mustEncode(t, protocol.NewMap("serializer", "pickle", "num-sub-frames", int64(1))), Frames: [][]byte{[]byte(s)}}
	}
	// One Send call appends atomically, so both messages share a batch.
	if err := bs.Send(protocol.NewMap("op", "data", "v", blob("one")), protocol.NewMap("op", "data", "v", blob("two"))); err != nil {
		t.Fatal(err)
	}
	frames, err := b.ReadFrames()
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 5 {
		t.Fatalf("batch of two one-frame blobs has %d frames, want 1+2+2", len(frames))
	}
	v, err := protocol.Decode(frames)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"one", "two"} {
		got := v.([]any)[i].(*protocol.Map).Get("v").(*protocol.Blob)
		if string(got.Frames[0]) != s {
			t.Fatalf("blob %d carries %q", i, got.Frames[0])
		}
	}
	_ = bs.Close(context.Background())
}

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	frames, err := protocol.Encode(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	return frames[0]
}

func TestBatchedCloseFlushes(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	bs := NewBatchedSend(a, 0, nil)
	done := make(chan []any)
	go func() {
		var all []any
		for len(all) < 10 {
			v, err := b.Read()
			if err != nil {
				break
			}
			all = append(all, v.([]any)...)
		}
		done <- all
	}()
	for i := range 10 {
		_ = bs.Send(fmt.Sprint(i))
	}
	if err := bs.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := <-done; len(got) != 10 || got[9] != "9" {
		t.Fatalf("after Close the peer got %v", got)
	}
	if err := bs.Send("late"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	if a.Closed() {
		t.Fatal("Close must leave the Conn to its owner")
	}
}

func TestBatchedWriteErrorReported(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	reported := make(chan error, 1)
	bs := NewBatchedSend(a, 0, func(err error) { reported <- err })
	b.Close()
	_ = bs.Send("x")
	err := <-reported
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("reported %v, want ErrClosed", err)
	}
	<-bs.Done()
	if !errors.Is(bs.Err(), ErrClosed) || !errors.Is(bs.Send("y"), ErrClosed) {
		t.Fatalf("Err %v after failure", bs.Err())
	}
	if !a.Closed() {
		t.Fatal("a failed stream must close its Conn")
	}
}

func TestBatchedAbortUnblocks(t *testing.T) {
	a, _ := pipePair(t, nil, nil)
	bs := NewBatchedSend(a, 0, nil)
	_ = bs.Send("blocks forever: nobody reads the pipe")
	aborted := make(chan struct{})
	go func() {
		bs.Abort() // must return although the write is stuck
		close(aborted)
	}()
	select {
	case <-aborted:
	case <-time.After(10 * time.Second):
		t.Fatal("Abort did not return within 10 s of a write stuck on a peer that never reads")
	}
	select {
	case <-bs.Done():
	default:
		t.Fatal("Abort returned before the writer goroutine exited")
	}
	if !a.Closed() {
		t.Fatal("Abort left the Conn open")
	}
	if err := bs.Send("late"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Abort: %v, want ErrClosed", err)
	}
}

// With interval 0 no write ever waits for a timer: a message on an idle
// stream is written at once, one sent during a write right after it. The
// same sequence with an interval makes writes wait (the control).
func TestBatchedFlushesOnIdle(t *testing.T) {
	for _, interval := range []time.Duration{0, 20 * time.Millisecond} {
		a, b := pipePair(t, nil, nil)
		bs := NewBatchedSend(a, interval, nil)
		read := make(chan int, 1)
		go func() {
			_, batches := readBatches(t, b, 40)
			read <- batches
		}()
		for i := range 40 {
			if err := bs.Send(protocol.NewMap("op", "m", "i", int64(i))); err != nil {
				t.Fatal(err)
			}
			if i%4 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		<-read
		delayed := bs.Delayed()
		bs.Abort()
		if interval == 0 && delayed != 0 {
			t.Fatalf("flush on idle: %d writes waited for a timer", delayed)
		}
		if interval > 0 && delayed == 0 {
			t.Fatalf("with a %v interval no write waited: the control does not exercise the timer", interval)
		}
	}
}

// With an interval, messages sent within it after a write wait for it and
// go out together (the zero worker's emulation of a stock worker).
func TestBatchedIntervalCoalesces(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	bs := NewBatchedSend(a, 50*time.Millisecond, nil)
	defer bs.Abort()
	read := make(chan int, 1)
	go func() {
		_, batches := readBatches(t, b, 11)
		read <- batches
	}()
	_ = bs.Send("first") // idle: at once
	time.Sleep(5 * time.Millisecond)
	for i := range 10 {
		_ = bs.Send(fmt.Sprint(i))
	}
	if batches := <-read; batches != 2 {
		t.Fatalf("11 messages within one 50 ms interval took %d batches, want 2", batches)
	}
}

// Shut returns at once although nobody reads the pipe; its writer gives up
// at the deadline and closes the Conn.
func TestBatchedShutDoesNotWaitForAPeerThatDoesNotRead(t *testing.T) {
	a, _ := pipePair(t, nil, nil)
	bs := NewBatchedSend(a, 0, nil)
	_ = bs.Send("blocks: nobody reads the pipe")
	bs.Shut(time.Hour)
	select {
	case <-bs.Done():
		t.Fatal("the writer stopped before its deadline although its write was stuck")
	default:
	}
	if err := bs.Send("late"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Shut: %v, want ErrClosed", err)
	}
	_ = a.SetWriteDeadline(time.Now()) // what the hour would do
	select {
	case <-bs.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not stop within 10 s of its write deadline")
	}
	if !a.Closed() {
		t.Fatal("Shut left the Conn open after the writer stopped")
	}
}

// A reading peer gets everything queued before Shut, then the end of the
// stream.
func TestBatchedShutDrainsThenCloses(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	bs := NewBatchedSend(a, 0, nil)
	for i := range 5 {
		_ = bs.Send(fmt.Sprint(i))
	}
	bs.Shut(time.Minute)
	msgs, _ := readBatches(t, b, 5)
	if msgs[4] != "4" {
		t.Fatalf("the peer read %v", msgs)
	}
	if _, err := b.Read(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after the drained messages the peer read %v, want the end of the stream", err)
	}
	<-bs.Done()
}

// Nothing queued during a Hold is written before Release; then all of it,
// in order.
func TestBatchedHoldDefersWritesUntilRelease(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	bs := NewBatchedSend(a, 0, nil)
	bs.Hold()
	_ = bs.Queue("first")
	bs.Flush()
	_ = bs.Send("second")
	got := make(chan any, 1)
	go func() {
		v, err := b.Read()
		if err != nil {
			v = err
		}
		got <- v
	}()
	select {
	case v := <-got:
		t.Fatalf("the peer read %s during a Hold", protocol.String(v))
	case <-time.After(100 * time.Millisecond):
	}
	bs.Release()
	var v any
	select {
	case v = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was written within 10 s of Release")
	}
	batch, _ := v.([]any)
	if len(batch) != 2 || batch[0] != "first" || batch[1] != "second" {
		t.Fatalf("after Release the peer read %s, want [first second]", protocol.String(v))
	}
	_ = bs.Close(context.Background())
}

// TestBatchedDrainedOnlyOnceEveryMessageIsEncoded: Drained is false while
// a message waits in the buffer (held) or in a write the peer has not
// taken yet, and true once the peer has it, and after Abort.
func TestBatchedDrainedOnlyOnceEveryMessageIsEncoded(t *testing.T) {
	a, b := pipePair(t, nil, nil)
	bs := NewBatchedSend(a, 0, nil)
	if !bs.Drained() {
		t.Fatal("a new stream is not drained")
	}
	bs.Hold()
	_ = bs.Queue("first")
	bs.Flush()
	if bs.Drained() {
		t.Fatal("drained with a message held in the buffer")
	}
	bs.Release() // the writer takes it; net.Pipe blocks it until the peer reads
	time.Sleep(50 * time.Millisecond)
	if bs.Drained() {
		t.Fatal("drained while the write of the message waits for the peer")
	}
	if v, err := b.Read(); err != nil {
		t.Fatalf("read: %v", err)
	} else if batch, _ := v.([]any); len(batch) != 1 || batch[0] != "first" {
		t.Fatalf("the peer read %s, want [first]", protocol.String(v))
	}
	deadline := time.Now().Add(10 * time.Second)
	for !bs.Drained() {
		if time.Now().After(deadline) {
			t.Fatal("not drained 10 s after the peer read the only message")
		}
		time.Sleep(time.Millisecond)
	}
	_ = bs.Queue("second") // never written: the peer stops reading
	bs.Flush()
	bs.Abort()
	if !bs.Drained() {
		t.Fatal("not drained after Abort")
	}
}
