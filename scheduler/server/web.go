package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"daskgo/compat"
	"daskgo/protocol"
	"daskgo/scheduler"
	"daskgo/scheduler/server/web"
)

// The HTTP server on the dashboard address (package web) reads the
// engine's view through this Backend: the snapshot the loop publishes on
// its ticks while someone reads it (snapshots), and one engine request per
// RPC-like route.

type webBackend struct{ s *Server }

var _ web.Backend = webBackend{}

// snapshots holds the engine's view for the HTTP routes. The loop builds
// one on a tick only if a route read the last one since the previous
// build: a build costs a WorkerView per worker and a sort (at
// 1,000 workers the dashboard nobody watches was rebuilt twice a second).
// A read that finds the snapshot older than two ticks (nobody read for a
// while) builds one under the engine's lock at once, so a reader never sees a stale
// view; an open dashboard page reads every eventPoll and keeps the ticks
// building. Invariant: cur is nil only before the first build.
type snapshots struct {
	cur     atomic.Pointer[scheduler.Snapshot]
	builtAt atomic.Int64 // Clock time of cur's build, unix nanoseconds
	read    atomic.Bool  // a route read cur since it was built
}

// onTick runs under the engine's lock: rebuild if the last snapshot was read.
func (p *snapshots) onTick(st *scheduler.State, now time.Time) {
	if p.read.Swap(false) || p.cur.Load() == nil {
		p.store(st.Snapshot(), now)
	}
}

func (p *snapshots) store(snap *scheduler.Snapshot, now time.Time) {
	p.cur.Store(snap)
	p.builtAt.Store(now.UnixNano())
}

func (b webBackend) Snapshot() *scheduler.Snapshot {
	p := &b.s.snap
	p.read.Store(true)
	now := b.s.clock.Now()
	if snap := p.cur.Load(); snap != nil && now.UnixNano()-p.builtAt.Load() <= 2*int64(b.s.cfg.TickEvery) {
		return snap
	}
	// before the first tick, or nobody read for a while: take one now
	var snap *scheduler.Snapshot
	if err := b.s.loop.query(b.s.ctx, func(st *scheduler.State) { snap = st.Snapshot() }); err != nil || snap == nil {
		if old := p.cur.Load(); old != nil {
			return old
		}
		return &scheduler.Snapshot{}
	}
	p.store(snap, now)
	return snap
}

func (b webBackend) Identity(ctx context.Context) (any, error) { return b.s.IdentityJSON(ctx) }

func (b webBackend) Counts(ctx context.Context) (map[string]int64, error) {
	var c map[string]int64
	err := b.s.loop.query(ctx, func(st *scheduler.State) {
		c = st.Counts()
		c["desired_workers"] = int64(st.AdaptiveTarget(0))
	})
	return c, err
}

func (b webBackend) Workers(ctx context.Context) ([]web.NamedWorker, error) {
	var out []web.NamedWorker
	err := b.s.loop.query(ctx, func(st *scheduler.State) {
		for _, addr := range st.WorkerAddresses() {
			out = append(out, web.NamedWorker{Name: st.Worker(addr).NameValue, Address: addr})
		}
	})
	return out, err
}

func (b webBackend) AdaptiveTarget(ctx context.Context) (int, error) {
	var n int
	err := b.s.loop.query(ctx, func(st *scheduler.State) { n = st.AdaptiveTarget(0) })
	return n, err
}

func (b webBackend) WorkersToClose(ctx context.Context, n int) ([]string, error) {
	var out []string
	err := b.s.loop.query(ctx, func(st *scheduler.State) {
		out = st.WorkersToClose(scheduler.CloseQuery{N: n, Target: -1})
	})
	return out, err
}

// RetireWorkers is the api's retire_workers: retire_workers(workers=...)
// with distributed's defaults (remove, do not close: the operator deletes
// the workers' pods itself).
func (b webBackend) RetireWorkers(ctx context.Context, workers []string) (map[string]any, error) {
	out, err := b.s.retire(ctx, nil, stringsAny(workers), false, true, "")
	if err != nil {
		return nil, err
	}
	m, _ := jsonValue(out).(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

func (b webBackend) CheckIdle(ctx context.Context) (*float64, error) { return b.s.idleSince(ctx) }

func (b webBackend) Process() web.ProcessFacts {
	c := &b.s.counters
	f := web.ProcessFacts{
		ClientConnectionsAdded: c.clientsAdded.Load(), ClientConnectionsRemoved: c.clientsRemoved.Load(),
		WorkersAdded: c.workersAdded.Load(), WorkersRemoved: c.workersRemoved.Load(),
		Ticks: c.ticks.Load(), TickMax: time.Duration(c.tickMaxNanos.Swap(0)),
		LockHeldMax: time.Duration(c.lockHeldMaxNanos.Swap(0)),
	}
	if q := b.s.splugins.queue; q != nil {
		f.PluginEventsQueued, f.PluginEventsDropped = q.stats()
	}
	for _, pid := range b.s.mat.PIDs() {
		f.HelperRSS = append(f.HelperRSS, compat.ProcessRSS(pid))
	}
	return f
}

// jsonValue turns a decoded wire value into one encoding/json writes as
// distributed's handlers write it: dicts with string keys, keys as their
// Python str(), sets as lists, opaque blobs as their description.
func jsonValue(v any) any {
	switch x := v.(type) {
	case *protocol.Map:
		if x == nil {
			return nil
		}
		out := make(map[string]any, x.Len())
		for _, e := range x.Entries {
			k, ok := e.Key.(string)
			if !ok {
				k = protocol.String(e.Key)
			}
			out[k] = jsonValue(e.Value)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case protocol.Set:
		return jsonValue([]any(x))
	case protocol.Key:
		return jsonValue(x.Value())
	case []byte:
		return string(x)
	case *protocol.Blob:
		return protocol.String(x)
	case protocol.Raw: // a heartbeat's metrics, kept undecoded (heartbeatFast)
		v, err := protocol.Decode([][]byte{x})
		if err != nil {
			return fmt.Sprintf("<undecodable: %v>", err)
		}
		return jsonValue(v)
	case nil, bool, string, int64, uint64, float64, int:
		return x
	}
	return fmt.Sprint(v)
}
