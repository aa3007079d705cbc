package main

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Script is the traffic of one recorded run, as msgfloor.py extracts it
// from the scheduler's --log-level trace log (scheduler/server/trace.go):
// every connection the scheduler had, and every message it read, in time
// order, each with the messages the scheduler wrote after reading it and
// before reading the next one (on any connection). Sizes are bytes on the
// wire, framing included.
type Script struct {
	Source string   `json:"source"` // what run it was recorded from
	Conns  []string `json:"conns"`  // a role per connection: worker-stream, client-stream, rpc
	Events []Event  `json:"events"`
}

// Event is one message read by the scheduler.
type Event struct {
	AtNs    int64   `json:"t"`           // offset from the first event
	Conn    int     `json:"c"`           // which connection carried it
	Bytes   int     `json:"b"`           // its size
	Replies [][]int `json:"r"`           // [conn, bytes] of each message written after it
	Tasks   int     `json:"k,omitempty"` // task-finished ops in it (for per-task figures)
}

// loadScript reads a script, gzipped when the name ends in .gz, and checks
// that every connection index and size is usable.
func loadScript(path string) (*Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open script: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("script %s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	var s Script
	if err := json.NewDecoder(r).Decode(&s); err != nil {
		return nil, fmt.Errorf("script %s: %w", path, err)
	}
	return &s, s.check()
}

func (s *Script) check() error {
	if len(s.Conns) == 0 || len(s.Events) == 0 {
		return fmt.Errorf("script has %d connections and %d events", len(s.Conns), len(s.Events))
	}
	ok := func(conn, size int) bool { return conn >= 0 && conn < len(s.Conns) && size >= minMessage }
	for i, e := range s.Events {
		if !ok(e.Conn, e.Bytes) {
			return fmt.Errorf("event %d: connection %d, %d bytes", i, e.Conn, e.Bytes)
		}
		for _, r := range e.Replies {
			if len(r) != 2 || !ok(r[0], r[1]) {
				return fmt.Errorf("event %d: reply %v", i, r)
			}
		}
	}
	return nil
}

// minMessage is the smallest message: u64 size, u64 frame count 1, one u64
// length (distributed/comm/tcp.py's framing), and an empty frame.
const minMessage = 24

// message is a message of size bytes: the framing of one frame, then zero
// bytes. Peers here only count messages, so the contents do not matter;
// sizes do (copies, segments).
func message(size int) []byte {
	b := make([]byte, size)
	putU64(b[0:], uint64(size-8))
	putU64(b[8:], 1)
	putU64(b[16:], uint64(size-minMessage))
	return b
}

func putU64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func getU64(b []byte) uint64 {
	var v uint64
	for i := range 8 {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

// splitter finds message boundaries in a byte stream of framed messages
// without keeping the messages: it holds at most one header.
type splitter struct {
	hdr  []byte // the header being collected: 16 bytes, then the lengths
	need int    // header bytes still wanted (0: skipping a body)
	skip uint64 // body bytes still to skip
}

func newSplitter() *splitter { return &splitter{need: 16} }

// feed consumes p and returns how many messages ended in it.
func (s *splitter) feed(p []byte) (done int, err error) {
	for len(p) > 0 {
		if s.need == 0 {
			n := min(uint64(len(p)), s.skip)
			s.skip -= n
			p = p[n:]
			if s.skip == 0 {
				done++
				s.hdr, s.need = s.hdr[:0], 16
			}
			continue
		}
		n := min(len(p), s.need)
		s.hdr = append(s.hdr, p[:n]...)
		s.need -= n
		p = p[n:]
		if s.need > 0 {
			continue
		}
		if len(s.hdr) == 16 { // the frame count is in: the lengths follow
			frames := getU64(s.hdr[8:])
			if frames == 0 || frames > 1<<20 {
				return done, fmt.Errorf("frame count %d", frames)
			}
			s.need = int(8 * frames)
			continue
		}
		s.skip = 0
		for i := 16; i < len(s.hdr); i += 8 {
			s.skip += getU64(s.hdr[i:])
		}
		if s.skip == 0 {
			done++
			s.hdr, s.need = s.hdr[:0], 16
		}
	}
	return done, nil
}
