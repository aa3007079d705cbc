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
	bs := NewBatchedSend(a, SchedulerToWorkerInterval, nil)
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
	bs := NewBatchedSend(a, SchedulerToClientInterval, nil)
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
	bs := NewBatchedSend(a, SchedulerToWorkerInterval, nil)
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
	bs := NewBatchedSend(a, SchedulerToWorkerInterval, func(err error) { reported <- err })
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
	bs := NewBatchedSend(a, SchedulerToWorkerInterval, nil)
	_ = bs.Send("blocks forever: nobody reads the pipe")
	bs.Abort() // must return although the write is stuck
	<-bs.Done()
}

// A steady flow of messages on an adaptive stream settles at the busy
// interval: over 300 ms of a message per millisecond, a fixed 2 ms stream
// writes up to 150 batches, the adaptive one about 15 (plus the ramp).
// The flow is only steady if the sender keeps its pace: on a loaded
// machine a 1 ms sleep can take many, the gaps reset the interval (as they
// should), and the attempt says nothing. Such attempts are repeated, up
// to five; if none kept pace the test fails saying so.
func TestAdaptiveBatchedGrowsWhileBusy(t *testing.T) {
	const n = 300
	for attempt := 1; attempt <= 5; attempt++ {
		a, b := pipePair(t, nil, nil)
		bs := NewAdaptiveBatchedSend(a, 2*time.Millisecond, 20*time.Millisecond, nil)
		read := make(chan int, 1)
		go func() {
			_, batches := readBatches(t, b, n)
			read <- batches
		}()
		t0 := time.Now()
		maxGap := time.Duration(0)
		for i := range n {
			if err := bs.Send(protocol.NewMap("op", "m", "i", int64(i))); err != nil {
				t.Fatal(err)
			}
			s0 := time.Now()
			time.Sleep(time.Millisecond)
			maxGap = max(maxGap, time.Since(s0))
		}
		elapsed := time.Since(t0)
		batches := <-read
		if err := bs.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if maxGap >= 8*time.Millisecond { // a gap this long resets a ramping interval
			t.Logf("attempt %d: the sender stalled for %v (%v in all): not a steady flow", attempt, maxGap, elapsed)
			continue
		}
		if batches > 30 {
			t.Fatalf("%d steady messages over %v took %d batches; want at most 30 at a 20 ms busy interval", n, elapsed, batches)
		}
		return
	}
	t.Fatal("the machine is too loaded for a steady 1 ms flow in five attempts: the busy interval was not tested")
}
