package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"daskgo/protocol"
)

// connCounter is a server whose handlers record which connections they saw.
type connCounter struct {
	mu    sync.Mutex
	conns map[*Conn]bool
}

func (cc *connCounter) seen(c *Conn) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.conns[c] = true
}

func (cc *connCounter) count() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return len(cc.conns)
}

func poolServer(t *testing.T, extra map[string]Handler) (string, *connCounter) {
	cc := &connCounter{conns: map[*Conn]bool{}}
	s := identityServer()
	s.Handlers["echo"] = func(ctx context.Context, req *Request) (any, error) {
		cc.seen(req.Conn)
		return Echo(ctx, req)
	}
	// get_data as a worker serves it: reply, then wait for the caller's "OK".
	s.Handlers["get_data"] = func(_ context.Context, req *Request) (any, error) {
		cc.seen(req.Conn)
		req.SkipReply()
		if err := req.Conn.Write(protocol.NewMap("status", "OK", "data", protocol.NewMap())); err != nil {
			return nil, err
		}
		ack, err := req.Conn.Read()
		if err != nil {
			return nil, err
		}
		if ack != "OK" {
			return nil, errors.New("get_data: no OK from the caller")
		}
		return nil, nil
	}
	for k, h := range extra {
		s.Handlers[k] = h
	}
	return testServer(t, s), cc
}

func TestPoolReusesConnections(t *testing.T) {
	addr, cc := poolServer(t, nil)
	p := NewPool(PoolConfig{})
	defer p.Close()
	for i := range 5 {
		reply, err := p.Call(context.Background(), addr, protocol.NewMap("op", "echo", "data", int64(i)))
		if err != nil || reply != int64(i) {
			t.Fatalf("call %d: %v %v", i, reply, err)
		}
		err = p.Do(context.Background(), addr, func(c *Conn) error {
			if _, err := c.Call(context.Background(), protocol.NewMap("op", "get_data", "keys", []any{"x"})); err != nil {
				return err
			}
			return c.Write("OK")
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if cc.count() != 1 || p.Open() != 1 || p.IdleCount(addr) != 1 {
		t.Fatalf("server saw %d conns, pool has %d open / %d idle; want 1/1/1", cc.count(), p.Open(), p.IdleCount(addr))
	}
}

func TestPoolRemoteErrorKeepsConnection(t *testing.T) {
	addr, _ := poolServer(t, nil)
	p := NewPool(PoolConfig{})
	defer p.Close()
	_, err := p.Call(context.Background(), addr, protocol.NewMap("op", "no-such-op"))
	var rerr *RemoteError
	if !errors.As(err, &rerr) {
		t.Fatalf("err = %v, want RemoteError", err)
	}
	if p.IdleCount(addr) != 1 {
		t.Fatal("a connection that completed its exchange must be reused")
	}
}

// Concurrent calls need separate connections; the limit bounds them.
func TestPoolLimit(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	addr, cc := poolServer(t, map[string]Handler{
		"wait": func(context.Context, *Request) (any, error) {
			entered <- struct{}{}
			<-release
			return "done", nil
		},
	})
	p := NewPool(PoolConfig{Limit: 1})
	defer p.Close()
	first := make(chan error, 1)
	go func() {
		_, err := p.Call(context.Background(), addr, protocol.NewMap("op", "wait"))
		first <- err
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.Call(ctx, addr, protocol.NewMap("op", "echo")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second call at the limit: %v, want it to wait and time out", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := p.Call(context.Background(), addr, protocol.NewMap("op", "echo")); err != nil {
		t.Fatal(err)
	}
	if p.Open() != 1 || cc.count() != 1 {
		t.Fatalf("open %d, echo saw %d conns", p.Open(), cc.count())
	}
}

// A pooled connection the peer closed while idle is discarded, not used.
func TestPoolDropsStaleConnection(t *testing.T) {
	addr, _ := poolServer(t, nil)
	p := NewPool(PoolConfig{})
	defer p.Close()
	if _, err := p.Call(context.Background(), addr, protocol.NewMap("op", "echo", "close", true)); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	stale := p.idle[addr][0]
	p.mu.Unlock()
	for !peerClosed(stale.nc) { // wait for the server's FIN to arrive
		time.Sleep(time.Millisecond)
	}
	if reply, err := p.Call(context.Background(), addr, protocol.NewMap("op", "echo", "data", "fresh")); err != nil || reply != "fresh" {
		t.Fatalf("call after stale: %v %v", reply, err)
	}
	if !stale.Closed() || p.Open() != 1 {
		t.Fatalf("stale closed=%v, open=%d", stale.Closed(), p.Open())
	}
}

func TestPoolFailedExchangeClosesAndClose(t *testing.T) {
	addr, _ := poolServer(t, nil)
	p := NewPool(PoolConfig{})
	boom := errors.New("caller gave up")
	var used *Conn
	err := p.Do(context.Background(), addr, func(c *Conn) error { used = c; return boom })
	if !errors.Is(err, boom) || !used.Closed() || p.Open() != 0 {
		t.Fatalf("err %v, closed %v, open %d", err, used.Closed(), p.Open())
	}
	if _, err := p.Call(context.Background(), "tcp://127.0.0.1:1", protocol.NewMap("op", "echo")); err == nil || p.Open() != 0 {
		t.Fatalf("dial failure: %v, open %d", err, p.Open())
	}
	p.Close()
	if _, err := p.Call(context.Background(), addr, protocol.NewMap("op", "echo")); !errors.Is(err, ErrPoolClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func TestPoolRemoveClosesIdleConnectionsOfThatAddress(t *testing.T) {
	gone, _ := poolServer(t, nil)
	kept, _ := poolServer(t, nil)
	p := NewPool(PoolConfig{})
	defer p.Close()
	for _, addr := range []string{gone, kept} {
		if _, err := p.Call(context.Background(), addr, protocol.NewMap("op", "echo", "data", int64(1))); err != nil {
			t.Fatal(err)
		}
	}
	p.Remove(gone)
	if p.Open() != 1 || p.IdleCount(gone) != 0 || p.IdleCount(kept) != 1 {
		t.Fatalf("after Remove: %d open, %d idle to the removed address, %d to the other; want 1/0/1",
			p.Open(), p.IdleCount(gone), p.IdleCount(kept))
	}
	if _, err := p.Call(context.Background(), gone, protocol.NewMap("op", "echo", "data", int64(2))); err != nil {
		t.Fatalf("an address that comes back is dialled again: %v", err)
	}
}

// A fan-out to more distinct addresses than the limit completes: a borrower
// waiting for a slot gets the one a returned connection frees, never waits
// while a connection sits idle (distributed's ConnectionPool.reuse/collect).
func TestPoolFanOutBeyondLimit(t *testing.T) {
	const limit, addrs, rounds = 2, 5, 20
	servers := make([]string, addrs)
	for i := range servers {
		servers[i], _ = poolServer(t, nil)
	}
	p := NewPool(PoolConfig{Limit: limit})
	defer p.Close()
	for round := range rounds {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, addrs)
		for i, addr := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				reply, err := p.Call(ctx, addr, protocol.NewMap("op", "echo", "data", int64(i)))
				if err == nil && reply != int64(i) {
					err = fmt.Errorf("reply %v from %s, want %d", reply, addr, i)
				}
				errs <- err
			}()
		}
		wg.Wait()
		cancel()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if p.Open() > limit {
			t.Fatalf("round %d: %d connections open, limit %d", round, p.Open(), limit)
		}
	}
}

// Borrowers arriving while every slot is held by idle connections to other
// addresses evict them instead of waiting (one borrower, many idle).
func TestPoolEvictsIdleForNewAddress(t *testing.T) {
	a, _ := poolServer(t, nil)
	b, _ := poolServer(t, nil)
	c, _ := poolServer(t, nil)
	p := NewPool(PoolConfig{Limit: 2})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, addr := range []string{a, b, c, a, b, c} {
		if _, err := p.Call(ctx, addr, protocol.NewMap("op", "echo", "data", "x")); err != nil {
			t.Fatal(err)
		}
	}
	if p.Open() != 2 {
		t.Fatalf("%d open, want the limit 2", p.Open())
	}
}

// The default limit is distributed's: half the file-descriptor limit.
func TestPoolDefaultLimitIsHalfTheFileLimit(t *testing.T) {
	p := NewPool(PoolConfig{})
	defer p.Close()
	want := DefaultPoolLimit
	if n := fileLimit(); n >= 2 {
		want = n / 2
	}
	if p.limit != want || cap(p.slots) != want {
		t.Fatalf("limit %d (slots %d), want %d", p.limit, cap(p.slots), want)
	}
}
