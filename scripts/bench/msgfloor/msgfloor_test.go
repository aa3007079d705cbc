package main

import (
	"net"
	"testing"
	"time"
)

// The splitter finds every message whatever the read boundaries: the
// messages fed split at every byte, and fed whole.
func TestSplitterAtEveryBoundary(t *testing.T) {
	var stream []byte
	sizes := []int{minMessage, 25, 300, 70_000, minMessage}
	for _, n := range sizes {
		stream = append(stream, message(n)...)
	}
	for cut := range len(stream) + 1 {
		sp := newSplitter()
		a, err := sp.feed(stream[:cut])
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		b, err := sp.feed(stream[cut:])
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if a+b != len(sizes) {
			t.Fatalf("cut %d: %d + %d messages, want %d", cut, a, b, len(sizes))
		}
	}
	sp := newSplitter()
	for i, c := range stream {
		if _, err := sp.feed([]byte{c}); err != nil {
			t.Fatalf("byte %d: %v", i, err)
		}
	}
	if _, err := newSplitter().feed(make([]byte, 16)); err == nil {
		t.Fatal("a frame count of 0 was accepted")
	}
}

// A replay on loopback: every scripted message arrives at the floor, and
// every reply it writes arrives at the driver, on the right connections;
// with a goroutine per connection and polled (serve --batch).
func TestReplayDeliversEveryMessage(t *testing.T) {
	for _, batch := range []time.Duration{0, 5 * time.Millisecond} {
		t.Run(batch.String(), func(t *testing.T) { testReplay(t, batch) })
	}
}

func testReplay(t *testing.T, batch time.Duration) {
	s := &Script{Conns: []string{"worker-stream", "client-stream"}, Events: []Event{
		{AtNs: 0, Conn: 0, Bytes: 300, Replies: [][]int{{0, 500}, {1, 100}}},
		{AtNs: int64(time.Millisecond), Conn: 0, Bytes: 40, Replies: [][]int{{0, 500}}},
		{AtNs: int64(2 * time.Millisecond), Conn: 1, Bytes: 100_000, Replies: [][]int{{0, 500}, {0, 500}, {1, 30}}},
		{AtNs: int64(2 * time.Millisecond), Conn: 1, Bytes: 50},
	}}
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	f := newFloor(s)
	f.batch = batch
	served := make(chan error, 1)
	go func() { served <- f.serve(lis) }()
	rep, err := drive(s, lis.Addr().String(), 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if rep.Sent != 4 || f.in.Load() != 4 {
		t.Fatalf("sent %d, floor read %d; want 4 and 4", rep.Sent, f.in.Load())
	}
	if rep.Expected != 6 || rep.Received != 6 || f.writes.Load() != 6 || f.failed.Load() != 0 {
		t.Fatalf("replies: expected %d, received %d, written %d, failed %d; want 6, 6, 6, 0",
			rep.Expected, rep.Received, f.writes.Load(), f.failed.Load())
	}
	if u := f.meter.usage(); u.WindowS <= 0 {
		t.Fatalf("window %v s: the meter did not run", u.WindowS)
	}
}

// A script naming a connection it does not have is refused before any
// socket opens.
func TestScriptCheckRefusesBadIndexes(t *testing.T) {
	bad := []*Script{
		{Conns: []string{"rpc"}, Events: []Event{{Conn: 1, Bytes: 30}}},
		{Conns: []string{"rpc"}, Events: []Event{{Conn: 0, Bytes: 3}}},
		{Conns: []string{"rpc"}, Events: []Event{{Conn: 0, Bytes: 30, Replies: [][]int{{2, 30}}}}},
		{Conns: []string{"rpc"}},
	}
	for i, s := range bad {
		if s.check() == nil {
			t.Errorf("script %d accepted", i)
		}
	}
}
