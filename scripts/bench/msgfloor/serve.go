package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// floor is the scheduler side of a replay, and nothing else: one goroutine
// per connection reads what arrives (one read call per wake-up, into one
// buffer, finding message boundaries from the framing alone) and, for each
// message that ended, writes the messages the recorded scheduler wrote
// after reading it, each with one write call, inline, on whatever
// connection they went to. No decoding, no reply built per message (they
// are built before the window opens), no hand-off to another goroutine,
// no timer.
type floor struct {
	script *Script
	byConn [][]*Event     // each connection's events, in order
	out    []*outConn     // write side of each connection
	msgs   map[int][]byte // a prepared message per size
	meter  *meter
	reads  atomic.Int64 // read calls that returned bytes
	writes atomic.Int64
	in     atomic.Int64 // messages read
	failed atomic.Int64 // writes that failed (the peer gone)

	batch time.Duration // > 0: serveBatched, polling every batch
	raw   []int         // serveBatched's fds, by connection
}

type outConn struct {
	mu sync.Mutex // one message at a time on a connection
	c  net.Conn
}

func newFloor(s *Script) *floor {
	f := &floor{script: s, byConn: make([][]*Event, len(s.Conns)), out: make([]*outConn, len(s.Conns)),
		msgs: map[int][]byte{}, meter: &meter{}}
	for i := range s.Events {
		e := &s.Events[i]
		f.byConn[e.Conn] = append(f.byConn[e.Conn], e)
		for _, r := range e.Replies {
			if f.msgs[r[1]] == nil {
				f.msgs[r[1]] = message(r[1])
			}
		}
	}
	return f
}

// serve accepts the script's connections (each announces its index in its
// first 8 bytes), runs them, and returns when every one has ended.
func (f *floor) serve(lis net.Listener) error {
	conns := make([]net.Conn, len(f.out))
	for range conns {
		c, err := lis.Accept()
		if err != nil {
			return fmt.Errorf("accept: %w", err)
		}
		var idx [8]byte
		if _, err := io.ReadFull(c, idx[:]); err != nil {
			return fmt.Errorf("read connection index: %w", err)
		}
		i := int(getU64(idx[:]))
		if i >= len(conns) || conns[i] != nil {
			return fmt.Errorf("connection index %d of %d repeated or out of range", i, len(conns))
		}
		conns[i] = c
		f.out[i] = &outConn{c: c}
	}
	if f.batch > 0 {
		return f.serveBatched(conns, f.batch)
	}
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() { // owner: serve; exits at the peer's EOF
			defer wg.Done()
			errs[i] = f.run(i, c)
		}()
	}
	wg.Wait()
	f.meter.stop()
	for _, c := range conns {
		c.Close()
	}
	return errors.Join(errs...)
}

// run is one connection's loop: read, and reply for each message that
// ended.
func (f *floor) run(conn int, c net.Conn) error {
	buf := make([]byte, 64<<10)
	sp := newSplitter()
	seq := 0
	for {
		n, err := c.Read(buf)
		if n > 0 {
			f.meter.start()
			f.reads.Add(1)
			done, serr := sp.feed(buf[:n])
			if serr != nil {
				return fmt.Errorf("connection %d: %w", conn, serr)
			}
			for range done {
				if seq >= len(f.byConn[conn]) {
					return fmt.Errorf("connection %d: message %d beyond the script's %d", conn, seq, len(f.byConn[conn]))
				}
				f.in.Add(1)
				f.reply(f.byConn[conn][seq])
				seq++
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("connection %d: %w", conn, err)
		}
	}
}

// reply writes what the recorded scheduler wrote after reading e.
func (f *floor) reply(e *Event) {
	for _, r := range e.Replies {
		o := f.out[r[0]]
		o.mu.Lock()
		_, err := o.c.Write(f.msgs[r[1]])
		o.mu.Unlock()
		f.writes.Add(1)
		if err != nil {
			f.failed.Add(1)
		}
	}
}
