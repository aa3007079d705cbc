package main

import (
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DriveReport is what the driver prints: what it sent and received, and
// how far behind the script its sends fell.
type DriveReport struct {
	Sent         int     `json:"sent"`
	Received     int64   `json:"received"`
	Expected     int64   `json:"expected"` // replies in the script
	MaxLateMs    float64 `json:"max_late_ms"`
	MedianLateMs float64 `json:"median_late_ms"`
	DurationS    float64 `json:"duration_s"`
}

// drive plays the peers of a script against the floor at addr: it opens
// every connection, sends each event's message at its recorded offset
// divided by speed (a late send does not shift the later ones), reads and
// counts everything that comes back, and closes the connections once every
// reply arrived or drainTimeout passed after the last send. A speed above
// 1 replays a recording made at --log-level trace, which slows the
// scheduler and so its peers, at the pace of an untraced run.
func drive(s *Script, addr string, speed float64, drainTimeout time.Duration) (DriveReport, error) {
	if speed <= 0 {
		return DriveReport{}, fmt.Errorf("speed %v: must be positive", speed)
	}
	var rep DriveReport
	for _, e := range s.Events {
		rep.Expected += int64(len(e.Replies))
	}
	conns, err := dialAll(addr, len(s.Conns))
	if err != nil {
		return rep, err
	}
	defer closeAll(conns)
	var received atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() { // owner: drive; exits at EOF (the floor closes after our CloseWrite)
			defer wg.Done()
			drain(c, &received)
		}()
	}
	msgs := map[int][]byte{}
	for _, e := range s.Events {
		if msgs[e.Bytes] == nil {
			msgs[e.Bytes] = message(e.Bytes)
		}
	}
	late := make([]time.Duration, 0, len(s.Events))
	t0 := time.Now().Add(100 * time.Millisecond)
	for _, e := range s.Events {
		at := t0.Add(time.Duration(float64(e.AtNs) / speed))
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		late = append(late, time.Since(at))
		if _, werr := conns[e.Conn].Write(msgs[e.Bytes]); werr != nil {
			err = fmt.Errorf("send event %d on connection %d: %w", rep.Sent, e.Conn, werr)
			break
		}
		rep.Sent++
	}
	rep.DurationS = time.Since(t0).Seconds()
	for deadline := time.Now().Add(drainTimeout); received.Load() < rep.Expected && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	for _, c := range conns {
		_ = c.CloseWrite()
	}
	wg.Wait()
	rep.Received = received.Load()
	slices.Sort(late)
	if n := len(late); n > 0 {
		rep.MaxLateMs, rep.MedianLateMs = float64(late[n-1])/1e6, float64(late[n/2])/1e6
	}
	return rep, err
}

// dialAll opens n connections to the floor, each announcing its index.
func dialAll(addr string, n int) ([]*net.TCPConn, error) {
	conns := make([]*net.TCPConn, 0, n)
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
		conns = append(conns, c.(*net.TCPConn))
		var idx [8]byte
		putU64(idx[:], uint64(i))
		if _, err := c.Write(idx[:]); err != nil {
			closeAll(conns)
			return nil, fmt.Errorf("announce connection %d: %w", i, err)
		}
	}
	return conns, nil
}

// drain reads a connection to EOF, counting its messages into n.
func drain(c net.Conn, n *atomic.Int64) {
	buf := make([]byte, 256<<10)
	sp := newSplitter()
	for {
		k, err := c.Read(buf)
		done, serr := sp.feed(buf[:k])
		n.Add(int64(done))
		if err != nil || serr != nil {
			return
		}
	}
}

func closeAll(conns []*net.TCPConn) {
	for _, c := range conns {
		c.Close()
	}
}
