package comm

import (
	"io"
	"sync"
)

// A connection borrows its read buffers instead of owning them: the
// buffer in front of the socket (readBufferSize) and the one-frame scratch
// (readScratchSize) are taken from shared pools when bytes arrive and given
// back once they are read and decoded. At 1,000 workers the scheduler holds
// about 2,000 connections (a stream and a heartbeat connection a worker, and
// the pool's), nearly all waiting for their next message at any moment;
// owned buffers were 41 of the 60 MB of live heap an idle scheduler had
// there, and the GC's target doubles live heap in RSS.
//
// On Linux TCP (rawIO) a waiting connection holds no buffer at all: the
// read that finds nothing gives its buffer back before the goroutine parks
// (rawIO.readBorrowing), so borrowing costs no system call.
var (
	readBufPool = sync.Pool{New: func() any { b := make([]byte, readBufferSize); return &b }}
	scratchPool = sync.Pool{New: func() any { b := make([]byte, readScratchSize); return &b }}
)

// connReader is a bufio.Reader whose buffer is borrowed while it holds
// unread bytes and returned when they are all read. One goroutine reads.
type connReader struct {
	src  io.Reader // the connection, when raw is nil
	raw  *rawIO
	bp   *[]byte // borrowed from readBufPool while r < w
	r, w int
	err  error // from a read that also returned bytes: reported next
}

func newConnReader(src io.Reader, raw *rawIO) *connReader {
	return &connReader{src: src, raw: raw}
}

// Buffered is the number of bytes read from the socket and not yet consumed.
func (b *connReader) Buffered() int { return b.w - b.r }

func (b *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.r == b.w {
		if len(p) >= readBufferSize && b.err == nil {
			return b.readDirect(p) // a large frame: straight into it, no copy
		}
		if err := b.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, (*b.bp)[b.r:b.w])
	b.r += n
	if b.r == b.w {
		b.giveBack()
	}
	return n, nil
}

// wait blocks until bytes are buffered; on rawIO it holds no buffer while
// it waits. A reader calls it before borrowing anything else for a message.
func (b *connReader) wait() error {
	if b.r < b.w {
		return nil
	}
	return b.fill()
}

func (b *connReader) fill() error {
	if b.err != nil {
		err := b.err
		b.err = nil
		return err
	}
	var n int
	var err error
	if b.raw != nil {
		b.bp, n, err = b.raw.readBorrowing()
	} else {
		b.bp = readBufPool.Get().(*[]byte)
		n, err = b.src.Read(*b.bp)
	}
	if n > 0 {
		b.r, b.w, b.err = 0, n, err
		return nil
	}
	b.giveBack()
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

func (b *connReader) readDirect(p []byte) (int, error) {
	if b.raw != nil {
		return b.raw.Read(p)
	}
	return b.src.Read(p)
}

func (b *connReader) giveBack() {
	if b.bp != nil {
		readBufPool.Put(b.bp)
		b.bp = nil
	}
	b.r, b.w = 0, 0
}
