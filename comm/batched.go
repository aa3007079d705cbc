package comm

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// BatchedSend coalesces messages on a stream like distributed's BatchedSend
// (distributed/batched.py): Send appends to a buffer and never touches the
// network; one owner goroutine writes the whole buffer as one message (a
// list of op dicts, whose blobs share one frame list).
//
// With interval 0, what the scheduler uses for every stream, a message goes
// out as soon as no write is in flight: batching only coalesces what queued
// while the previous write ran (nats-server's flush-on-idle). distributed
// holds a stream for its interval after each write (5 ms to workers, 2 ms to
// clients), and a chain of dependent tasks pays up to that much per hop; an
// engine that handles a read batch at a time already hands each stream one
// Send per batch, so the interval saves little (issue 32). A positive
// interval keeps distributed's rule, a write at most once per interval with
// a message after a quiet period going out at once: the zero worker emulates
// a stock worker's 2 ms stream with it.
//
// Lifecycle: NewBatchedSend starts the writer goroutine; Close flushes what
// is buffered and stops it, leaving the Conn open for its owner (who may
// still be reading the peer's close-stream); Abort drops the buffer, closes
// the Conn and stops. A write error stops it too: the error is kept (Err)
// and passed once to onError, and the Conn is closed so the stream's reader
// notices (distributed's BatchedSend.abort). All methods are safe for
// concurrent use.
type BatchedSend struct {
	conn     *Conn
	interval time.Duration // 0: flush on idle
	onError  func(error)

	mu       sync.Mutex
	buf      []any
	spare    []any // the last written buffer, emptied, for reuse
	stopping bool
	err      error
	messages int
	batches  int
	delayed  int // writes that waited for the interval

	wake chan struct{} // capacity 1: "the buffer may be non-empty"
	stop chan struct{} // closed by Close/Abort
	done chan struct{} // closed when the writer goroutine has exited
}

// NewBatchedSend starts batching onto c; interval 0 writes whenever idle.
// onError may be nil.
func NewBatchedSend(c *Conn, interval time.Duration, onError func(error)) *BatchedSend {
	b := &BatchedSend{
		conn:     c,
		interval: interval,
		onError:  onError,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go b.run()
	return b
}

// Send queues msgs (usually *protocol.Map op dicts) for the next batch. It
// fails with ErrClosed (wrapped) once the stream is closing or has failed.
func (b *BatchedSend) Send(msgs ...any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return fmt.Errorf("batched send to %s: %w", b.conn.Peer(), b.err)
	}
	if b.stopping || b.conn.Closed() {
		return fmt.Errorf("batched send to %s: %w", b.conn.Peer(), ErrClosed)
	}
	b.buf = append(b.buf, msgs...)
	b.messages += len(msgs)
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return nil
}

// run is the owner goroutine, distributed's BatchedSend._background_send:
// wait for messages; with an interval, if the last write was less than an
// interval ago, wait for the rest of it; write everything buffered; repeat.
// The timer is armed only when a message waits for it.
func (b *BatchedSend) run() {
	defer close(b.done)
	rest := time.NewTimer(time.Hour)
	rest.Stop()
	var last time.Time // when the last write ended; zero before the first
	for {
		select {
		case <-b.wake:
		case <-b.stop:
			b.flush()
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
					b.flush()
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

// flush writes the buffer as one message; false after a write error. The
// written buffer comes back as the next one (emptied: the frames it pointed
// to must not be kept alive), so a busy stream allocates no new buffers.
func (b *BatchedSend) flush() bool {
	b.mu.Lock()
	payload := b.buf
	b.buf = b.spare
	b.spare = nil
	if len(payload) > 0 && b.err == nil {
		b.batches++
	}
	failed := b.err != nil
	b.mu.Unlock()
	if failed {
		return false
	}
	if len(payload) == 0 {
		b.recycle(payload)
		return true
	}
	if err := b.conn.Write(payload); err != nil {
		b.fail(err)
		return false
	}
	b.recycle(payload)
	return true
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
	b.err, b.buf = err, nil
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

// Abort drops buffered messages, closes the Conn (unblocking a write in
// progress) and waits for the writer to stop.
func (b *BatchedSend) Abort() {
	b.mu.Lock()
	b.buf = nil
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
