package comm

import (
	"context"
	"fmt"
	"sync"
	"time"

	"daskgo/protocol"
)

// BatchedSend coalesces messages on a stream like distributed's BatchedSend
// (distributed/batched.py): messages are appended to a buffer and the whole
// buffer goes out as one message (a list of op dicts, whose blobs share one
// frame list).
//
// With interval 0, what the scheduler uses for every stream, a message goes
// out as soon as no write is in flight: batching only coalesces what queued
// while the previous write ran (nats-server's flush-on-idle). distributed
// holds a stream for its interval after each write (5 ms to workers, 2 ms to
// clients), and a chain of dependent tasks pays up to that much per hop; an
// engine that handles a read batch at a time already hands each stream one
// write per batch, so the interval saves little and small computations'
// round trips would pay it at every hop. A positive
// interval keeps distributed's rule, a write at most once per interval with
// a message after a quiet period going out at once: the zero worker emulates
// a stock worker's 2 ms stream with it.
//
// Two ways in. Send queues and wakes the stream's writer goroutine. Queue
// then Flush is the engine's way: Queue only appends, and Flush,
// called once the engine has handled a whole read batch, writes the buffer
// from the calling goroutine when no write is in flight and the Conn can
// write without waiting (Conn.TryWrite: raw TCP). No goroutine hand-off,
// no channel, no timer per message; what the socket does not take at once,
// and every write where the Conn cannot try (TLS, or an interval), goes to
// the writer goroutine, so the caller never waits for a slow peer.
//
// Lifecycle: NewBatchedSend starts the writer goroutine; Close flushes what
// is buffered and stops it, leaving the Conn open for its owner (who may
// still be reading the peer's close-stream); Shut is Close for a caller
// that must not wait (the engine's lock holder removing a worker): the
// writer drains the buffer within a deadline and then closes the Conn;
// Abort drops the buffer, closes the Conn and stops. A write error stops it
// too: the error is kept (Err) and passed once to onError, and the Conn is
// closed so the stream's reader notices (distributed's BatchedSend.abort).
// All methods are safe for concurrent use. Invariant: at most one write is
// in flight (writing), by Flush's caller or the writer goroutine, so
// messages keep their order.
//
// Hold and Release keep queued messages from being written for a while:
// an RPC whose stimulus sends on its caller's stream holds that stream
// until its reply is written, so that the reply goes first, as
// distributed's handle_comm writes a reply before the batched streams'
// next flush.
type BatchedSend struct {
	conn     *Conn
	interval time.Duration // 0: flush on idle
	inline   bool          // Flush may write from its caller (interval 0, Conn.CanTryWrite)
	onError  func(error)

	mu       sync.Mutex
	buf      []any
	bufBytes int   // estimate of buf's size (estimate)
	spare    []any // the last written buffer, emptied, for reuse
	writing  bool  // a write is in flight (inline or the writer's)
	pending  *Pending
	stopping bool
	shut     bool // Shut: the writer closes the Conn once it has drained
	held     int  // Hold count: nothing is written while > 0, unless stopping
	err      error
	messages int
	batches  int
	inlined  int // batches written by Flush's caller
	delayed  int // writes that waited for the interval

	wake chan struct{} // capacity 1: "there may be something to write"
	stop chan struct{} // closed by Close/Abort
	done chan struct{} // closed when the writer goroutine has exited
}

// NewBatchedSend starts batching onto c; interval 0 writes whenever idle.
// onError may be nil.
func NewBatchedSend(c *Conn, interval time.Duration, onError func(error)) *BatchedSend {
	b := &BatchedSend{
		conn:     c,
		interval: interval,
		inline:   interval == 0 && c.CanTryWrite(),
		onError:  onError,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go b.run()
	return b
}

// Send queues msgs (usually *protocol.Map op dicts) for the next batch and
// wakes the writer. It fails with ErrClosed (wrapped) once the stream is
// closing or has failed.
func (b *BatchedSend) Send(msgs ...any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.appendLocked(msgs); err != nil {
		return err
	}
	b.wakeLocked()
	return nil
}

// Queue appends msgs like Send but writes nothing: the caller calls Flush
// when it has queued everything it has (the engine, after a read batch).
func (b *BatchedSend) Queue(msgs ...any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.appendLocked(msgs)
}

func (b *BatchedSend) appendLocked(msgs []any) error {
	if b.err != nil {
		return fmt.Errorf("batched send to %s: %w", b.conn.Peer(), b.err)
	}
	if b.stopping || b.conn.Closed() {
		return fmt.Errorf("batched send to %s: %w", b.conn.Peer(), ErrClosed)
	}
	b.buf = append(b.buf, msgs...)
	b.messages += len(msgs)
	for _, m := range msgs {
		b.bufBytes += estimate(m)
	}
	return nil
}

func (b *BatchedSend) wakeLocked() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// inlineBytes bounds the batch Flush writes from its caller, by estimated
// size (estimate): encoding is the caller's time, and the caller holds the
// engine's lock. A new graph's compute-tasks without withholding come
// hundreds to a worker at once (on 50 workers with 64 KiB run_specs the
// engine held its lock 2 s encoding them, every other client waiting); the
// writer goroutine encodes such a batch while the engine goes on. The
// per-task exchanges of a running computation (a compute-task, a batch of
// key-in-memory) stay well under it and keep their inline write.
const inlineBytes = 256 << 10

// estimate is a message's size for inlineBytes: a fixed cost per message,
// plus the payloads a message carries at its top level (a compute-task's
// run_spec). Cheap: no encoding.
func estimate(m any) int {
	const perMessage = 64
	if mp, ok := m.(*protocol.Map); ok {
		return perMessage + mp.BlobBytes()
	}
	return perMessage
}

// Flush writes what Queue appended. With no write in flight on an inline
// stream it writes from the calling goroutine what the socket takes at
// once and leaves any rest to the writer goroutine; otherwise (a write in
// flight, a batch over inlineBytes) it wakes the writer, which
// picks the buffer up.
func (b *BatchedSend) Flush() {
	b.mu.Lock()
	if len(b.buf) == 0 || b.err != nil {
		b.mu.Unlock()
		return
	}
	if b.held > 0 && !b.stopping {
		b.mu.Unlock()
		return // Release flushes
	}
	if !b.inline || b.writing || b.stopping || b.bufBytes > inlineBytes {
		b.wakeLocked()
		b.mu.Unlock()
		return
	}
	payload, _ := b.takeLocked()
	b.inlined++
	b.mu.Unlock()

	p, err := b.conn.TryWrite(payload)
	b.recycle(payload) // encoded: the frames hold what the rest needs
	b.mu.Lock()
	switch {
	case err != nil:
		b.writing = false
	case p != nil:
		b.pending = p // still writing: the writer finishes it
		b.wakeLocked()
	default:
		b.writing = false
		if len(b.buf) > 0 || b.stopping {
			b.wakeLocked()
		}
	}
	b.mu.Unlock()
	if err != nil {
		b.fail(err)
	}
}

// takeLocked starts a write of the whole buffer; it returns the buffer and
// its estimated size.
func (b *BatchedSend) takeLocked() ([]any, int) {
	payload, bytes := b.buf, b.bufBytes
	b.buf, b.spare, b.bufBytes = b.spare, nil, 0
	b.writing = true
	b.batches++
	return payload, bytes
}

// run is the owner goroutine, distributed's BatchedSend._background_send:
// wait for messages; with an interval, if the last write was less than an
// interval ago, wait for the rest of it; write everything buffered; repeat.
// The timer is armed only when a message waits for it.
func (b *BatchedSend) run() {
	defer close(b.done)
	defer b.closeIfShut()
	rest := time.NewTimer(time.Hour)
	rest.Stop()
	var last time.Time // when the last write ended; zero before the first
	for {
		select {
		case <-b.wake:
		case <-b.stop:
			b.finish()
			return
		}
		if b.interval > 0 && !last.IsZero() {
			if wait := b.interval - time.Since(last); wait > 0 {
				b.mu.Lock()
				b.delayed++
				b.mu.Unlock()
				rest.Reset(wait)
				select {
				case <-rest.C:
				case <-b.stop:
					b.finish()
					return
				}
			}
		}
		if !b.flush() {
			return
		}
		if b.interval > 0 {
			last = time.Now()
		}
	}
}

// finish is the writer's last flush: it waits for an inline write in
// flight (Flush wakes it when that ends while stopping), then writes the
// rest.
func (b *BatchedSend) finish() {
	for {
		b.mu.Lock()
		inflight := b.writing && b.pending == nil && b.err == nil
		b.mu.Unlock()
		if !inflight {
			break
		}
		<-b.wake
	}
	for b.flush() {
		b.mu.Lock()
		more := len(b.buf) > 0 && b.err == nil
		b.mu.Unlock()
		if !more {
			return
		}
	}
}

// flush finishes a pending inline write, then writes the buffer as one
// message; false after a write error. While Flush's caller is writing it
// does nothing (that write wakes it again if more is queued). The written
// buffer comes back as the next one (emptied: the frames it pointed to
// must not be kept alive), so a busy stream allocates no new buffers.
func (b *BatchedSend) flush() bool {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return false
	}
	if p := b.pending; p != nil {
		b.pending = nil
		b.mu.Unlock()
		if err := p.Finish(); err != nil {
			b.fail(err)
			return false
		}
		b.mu.Lock()
		b.writing = false
	}
	if b.writing || len(b.buf) == 0 || (b.held > 0 && !b.stopping) {
		b.mu.Unlock()
		return true
	}
	payload, bytes := b.takeLocked()
	b.mu.Unlock()
	err := b.writeBatch(payload, bytes)
	b.recycle(payload)
	b.mu.Lock()
	b.writing = false
	b.mu.Unlock()
	if err != nil {
		b.fail(err)
		return false
	}
	return true
}

// encodeGate lets one writer at a time encode a batch of more than
// inlineBytes. The process runs on one P (cmd/dask-go-scheduler/
// runtime.go): fifty writers encoding a new graph's compute-tasks at once
// left the engine's lock holder a fiftieth of the CPU, so that it held the
// lock for seconds while every client waited. Gated, the engine competes
// with one encoder at a time. The gate is held for encoding only, never
// for the socket write: a writer stuck on a stopped peer holds nothing.
var encodeGate = make(chan struct{}, 1)

// writeBatch writes a batch as one message, encoding it under encodeGate
// when it is large.
func (b *BatchedSend) writeBatch(payload []any, bytes int) error {
	if bytes <= inlineBytes {
		return b.conn.Write(payload)
	}
	return b.conn.WriteGated(payload, encodeGate)
}

// recycle keeps buf as the spare buffer unless it grew unusually large
// (one huge batch should not pin its capacity for the stream's life).
func (b *BatchedSend) recycle(buf []any) {
	if cap(buf) > 1<<16 {
		return
	}
	clear(buf)
	b.mu.Lock()
	if b.spare == nil && b.err == nil {
		b.spare = buf[:0]
	}
	b.mu.Unlock()
}

func (b *BatchedSend) fail(err error) {
	b.mu.Lock()
	b.err, b.buf, b.bufBytes, b.pending = err, nil, 0, nil
	b.wakeLocked() // a finish waiting for an inline write
	b.mu.Unlock()
	b.conn.Close() // Python's BatchedSend.abort: the stream is unusable
	if b.onError != nil {
		b.onError(err)
	}
}

// Close flushes buffered messages and stops the writer. It returns the
// stream's write error, if any, or ctx's error if the final write did not
// finish in time (the Conn is then closed to unblock it).
func (b *BatchedSend) Close(ctx context.Context) error {
	b.beginStop()
	select {
	case <-b.done:
	case <-ctx.Done():
		b.conn.Close()
		<-b.done
		return fmt.Errorf("flush batched stream to %s: %w", b.conn.Peer(), ctx.Err())
	}
	return b.Err()
}

// Shut stops the stream without waiting for its peer: Send and Queue fail
// from now on, the writer goroutine writes what is buffered until the
// deadline d from now (a peer that does not read, a SIGSTOPped worker,
// makes that write fail then), and closes the Conn, which ends the
// stream's reader. Done is closed when all of that is over.
func (b *BatchedSend) Shut(d time.Duration) {
	b.mu.Lock()
	b.shut = true
	b.mu.Unlock()
	_ = b.conn.SetWriteDeadline(time.Now().Add(d))
	b.beginStop()
}

func (b *BatchedSend) closeIfShut() {
	b.mu.Lock()
	shut := b.shut
	b.mu.Unlock()
	if shut {
		b.conn.Close()
	}
}

// Hold keeps what is queued from being written until the matching
// Release; Queue and Send still append. Stopping the stream overrides it.
func (b *BatchedSend) Hold() {
	b.mu.Lock()
	b.held++
	b.mu.Unlock()
}

// Release ends a Hold and, with none left, writes what queued meanwhile
// as Flush does (what the socket takes at once, the rest by the writer).
func (b *BatchedSend) Release() {
	b.mu.Lock()
	b.held--
	if b.held < 0 {
		b.mu.Unlock()
		panic("comm: BatchedSend.Release without Hold")
	}
	held := b.held > 0
	b.mu.Unlock()
	if !held {
		b.Flush()
	}
}

// Abort drops buffered messages, closes the Conn (unblocking a write in
// progress) and waits for the writer to stop.
func (b *BatchedSend) Abort() {
	b.mu.Lock()
	b.buf, b.bufBytes = nil, 0
	b.mu.Unlock()
	b.beginStop()
	b.conn.Close()
	<-b.done
}

func (b *BatchedSend) beginStop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopping {
		b.stopping = true
		close(b.stop)
	}
}

// Drained reports that the stream holds none of the messages queued so
// far: each has been encoded (a write still finishing holds bytes, not
// messages) or dropped with the stream. Whoever built them may then reuse
// them. It errs on the side of false: a write in flight counts as holding
// its messages until it ends.
func (b *BatchedSend) Drained() bool {
	select {
	case <-b.done:
		return true // the writer has exited: nothing is encoded any more
	default:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf) == 0 && !b.writing
}

// Err is the write error that stopped the stream, or nil.
func (b *BatchedSend) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Done is closed when the writer goroutine has exited.
func (b *BatchedSend) Done() <-chan struct{} { return b.done }

// Delayed is how many writes waited for the interval (always 0 without one).
func (b *BatchedSend) Delayed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.delayed
}

// Stats reports how many messages were sent in how many batches.
func (b *BatchedSend) Stats() (messages, batches int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.messages, b.batches
}

// Inlined is how many batches Flush wrote from its caller's goroutine.
func (b *BatchedSend) Inlined() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inlined
}
