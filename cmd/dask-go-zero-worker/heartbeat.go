package main

import (
	"context"
	"fmt"
	"sync"

	"daskgo/comm"
)

// heartbeatCaller sends one heartbeat_worker RPC and returns the reply.
type heartbeatCaller interface {
	call(ctx context.Context, msg any) (any, error)
	close()
}

// ownConn is a stock worker's way: each worker heartbeats over a
// connection of its own (Worker.heartbeat through its rpc pool).
type ownConn struct{ conn *comm.Conn }

func dialOwn(ctx context.Context, addr string) (heartbeatCaller, error) {
	conn, err := comm.Dial(ctx, addr, nil)
	if err != nil {
		return nil, err
	}
	return &ownConn{conn: conn}, nil
}

func (o *ownConn) call(ctx context.Context, msg any) (any, error) { return o.conn.Call(ctx, msg) }
func (o *ownConn) close()                                         { o.conn.Close() }

// sharedConns lets the workers of one process heartbeat over a few
// connections (--heartbeat-conns): at 10,000 workers a connection each for
// the stream, the heartbeats and the listener is 30,000 sockets on
// 127.0.0.1, more than the 28,232 ephemeral ports of Linux's default
// ip_local_port_range, and 20,000 fds in the scheduler. heartbeat_worker
// names its worker, so the scheduler treats a shared connection's
// heartbeats exactly as separate ones. Calls on one connection take turns
// (a comm.Conn carries one RPC at a time).
type sharedConns struct {
	addr  string
	conns []*sharedConn
}

type sharedConn struct {
	mu   sync.Mutex
	conn *comm.Conn // dialed on first use; replaced after a failed call
}

func newSharedConns(addr string, n int) *sharedConns {
	s := &sharedConns{addr: addr, conns: make([]*sharedConn, n)}
	for i := range s.conns {
		s.conns[i] = &sharedConn{}
	}
	return s
}

// forWorker is worker i's caller: connection i mod n.
func (s *sharedConns) forWorker(i int) heartbeatCaller {
	return &sharedCaller{addr: s.addr, c: s.conns[i%len(s.conns)]}
}

// closeAll closes every connection once all workers are done.
func (s *sharedConns) closeAll() {
	for _, c := range s.conns {
		c.mu.Lock()
		if c.conn != nil {
			c.conn.Close()
			c.conn = nil
		}
		c.mu.Unlock()
	}
}

type sharedCaller struct {
	addr string
	c    *sharedConn
}

func (s *sharedCaller) call(ctx context.Context, msg any) (any, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.c.conn == nil {
		conn, err := comm.Dial(ctx, s.addr, nil)
		if err != nil {
			return nil, fmt.Errorf("shared heartbeat connection: %w", err)
		}
		s.c.conn = conn
	}
	reply, err := s.c.conn.Call(ctx, msg)
	if err != nil { // the connection may be out of step: the next call dials afresh
		s.c.conn.Close()
		s.c.conn = nil
	}
	return reply, err
}

// close leaves the shared connection to closeAll: other workers use it.
func (s *sharedCaller) close() {}
