package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// DefaultPoolLimit is distributed's ConnectionPool limit (open comms in
// total) where the process's file-descriptor limit cannot be read.
const DefaultPoolLimit = 512

// defaultPoolLimit is what distributed's Scheduler.__init__ passes as
// connection_limit: half the process's file-descriptor limit
// (utils.get_fileno_limit() / 2). Go raises the soft limit to the hard one
// at start, so this is half of what this process may open.
func defaultPoolLimit() int {
	if n := fileLimit(); n >= 2 {
		return n / 2
	}
	return DefaultPoolLimit
}

// Pool reuses handshaken connections per address for scheduler→worker and
// scheduler→nanny RPCs, like distributed.core.ConnectionPool: a connection
// serves one exchange at a time, idle ones are kept per address, and at most
// Limit are open in total. At the limit, idle connections to any address
// are closed to make room; if none are idle, callers wait for a release.
//
// Invariant: no borrower waits for a slot while a connection sits idle.
// A connection returned while borrowers wait is closed instead of kept
// (ConnectionPool.reuse calls collect() when the semaphore is locked and
// connects are pending), so a fan-out to more distinct addresses than Limit
// (gather, broadcast, retirement over every worker) always makes progress.
// Safe for concurrent use.
type Pool struct {
	opts        *Options
	limit       int
	maxIdlePer  int
	slots       chan struct{} // one token per open (or opening) connection
	mu          sync.Mutex    // guards idle, waiting and closed
	idle        map[string][]*Conn
	waiting     int // borrowers inside acquireSlot
	closed      bool
	dialContext func(ctx context.Context, addr string, opts *Options) (*Conn, error)
}

// PoolConfig sizes a Pool. Zero fields mean defaults.
type PoolConfig struct {
	Options *Options // for dialing; e.g. PickleProtocol 4 as distributed's scheduler announces
	Limit   int      // open connections in total; default half the fd limit

	// MaxIdlePerAddress bounds the idle connections kept per address; default 8.
	MaxIdlePerAddress int
}

// NewPool makes an empty pool.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.Limit <= 0 {
		cfg.Limit = defaultPoolLimit()
	}
	if cfg.MaxIdlePerAddress <= 0 {
		cfg.MaxIdlePerAddress = 8
	}
	return &Pool{
		opts:        cfg.Options,
		limit:       cfg.Limit,
		maxIdlePer:  cfg.MaxIdlePerAddress,
		slots:       make(chan struct{}, cfg.Limit),
		idle:        map[string][]*Conn{},
		dialContext: Dial,
	}
}

// Call sends one request to addr and returns the reply (Conn.Call on a
// pooled connection). An "uncaught-error" reply is a *RemoteError; the
// connection stays pooled since the exchange completed.
func (p *Pool) Call(ctx context.Context, addr string, msg any) (any, error) {
	var reply any
	err := p.Do(ctx, addr, func(c *Conn) error {
		var err error
		reply, err = c.Call(ctx, msg)
		var rerr *RemoteError
		if errors.As(err, &rerr) {
			return &keepConn{err}
		}
		return err
	})
	return reply, err
}

// keepConn marks an error after which the connection is still in step.
type keepConn struct{ error }

func (k *keepConn) Unwrap() error { return k.error }

// Do borrows a connection to addr for a multi-message exchange, e.g.
// get_data, whose caller must write "OK" after reading the reply. If fn
// returns nil the connection goes back to the pool; on error it is closed,
// since it may be out of step.
func (p *Pool) Do(ctx context.Context, addr string, fn func(c *Conn) error) error {
	c, err := p.get(ctx, addr)
	if err != nil {
		return err
	}
	err = fn(c)
	if k, ok := err.(*keepConn); ok {
		p.put(addr, c)
		return k.error
	}
	if err != nil {
		p.release(c)
		return err
	}
	p.put(addr, c)
	return nil
}

// get returns an idle connection to addr that the peer has not closed, or
// dials a new one once a slot is free.
func (p *Pool) get(ctx context.Context, addr string) (*Conn, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, fmt.Errorf("connect to %s: %w", addr, ErrPoolClosed)
		}
		c := p.popIdle(addr)
		p.mu.Unlock()
		if c == nil {
			break
		}
		if !c.Closed() && !peerClosed(c.nc) && c.r.Buffered() == 0 {
			return c, nil
		}
		p.release(c) // stale: the peer hung up while it sat idle
	}
	if err := p.acquireSlot(ctx, addr); err != nil {
		return nil, err
	}
	c, err := p.dialContext(ctx, addr, p.opts)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return c, nil
}

func (p *Pool) popIdle(addr string) *Conn {
	list := p.idle[addr]
	if len(list) == 0 {
		return nil
	}
	c := list[len(list)-1]
	p.idle[addr] = list[:len(list)-1]
	if len(p.idle[addr]) == 0 {
		delete(p.idle, addr)
	}
	return c
}

// acquireSlot takes a token for a new connection, evicting an idle
// connection to another address when the pool is full. A borrower that
// finds the pool full is counted as waiting before it looks for a victim,
// under the lock put takes: a connection returned after that is closed for
// it, one returned before is idle where evictOne finds it.
func (p *Pool) acquireSlot(ctx context.Context, addr string) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	default:
	}
	p.mu.Lock()
	p.waiting++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
	}()
	for {
		select {
		case p.slots <- struct{}{}:
			return nil
		default:
		}
		if victim := p.evictOne(); victim != nil {
			p.release(victim)
			continue
		}
		select {
		case p.slots <- struct{}{}:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("connect to %s: pool of %d connections is full: %w", addr, p.limit, ctx.Err())
		}
	}
}

func (p *Pool) evictOne() *Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr := range p.idle {
		return p.popIdle(addr)
	}
	return nil
}

// put returns a healthy connection to the idle set, or closes it when the
// pool is closed, that address already has enough idle connections, or a
// borrower waits for a slot (which closing frees).
func (p *Pool) put(addr string, c *Conn) {
	p.mu.Lock()
	if !p.closed && !c.Closed() && len(p.idle[addr]) < p.maxIdlePer && p.waiting == 0 {
		p.idle[addr] = append(p.idle[addr], c)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.release(c)
}

// release closes c and frees its slot.
func (p *Pool) release(c *Conn) {
	c.Close()
	<-p.slots
}

// Remove closes the idle connections to addr: the peer at addr left
// (distributed's Scheduler.remove_worker calls rpc.remove). Without it
// they stay open until the pool fills, one or more fds per worker that
// ever served data. A connection to addr in use now is kept or closed as
// usual when it is returned.
func (p *Pool) Remove(addr string) {
	p.mu.Lock()
	list := p.idle[addr]
	delete(p.idle, addr)
	p.mu.Unlock()
	for _, c := range list {
		p.release(c)
	}
}

// Open is the number of connections open or being opened.
func (p *Pool) Open() int { return len(p.slots) }

// IdleCount is the number of idle connections to addr.
func (p *Pool) IdleCount(addr string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle[addr])
}

// Close closes idle connections and makes later calls fail with
// ErrPoolClosed; connections in use are closed when they are returned.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = map[string][]*Conn{}
	p.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			p.release(c)
		}
	}
	return nil
}
