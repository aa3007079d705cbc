package server

import (
	"context"
	"fmt"
	"time"

	"daskgo/compat"
	"daskgo/protocol"
	"daskgo/scheduler"
	"daskgo/scheduler/server/web"
)

// The HTTP server on the dashboard address (package web) reads the
// engine's view through this Backend: the snapshot the loop publishes on
// every tick, and one engine request per RPC-like route.

type webBackend struct{ s *Server }

var _ web.Backend = webBackend{}

func (b webBackend) Snapshot() *scheduler.Snapshot {
	if snap := b.s.snap.Load(); snap != nil {
		return snap
	}
	// before the first tick: take one now
	var snap *scheduler.Snapshot
	if err := b.s.loop.query(b.s.ctx, func(st *scheduler.State) { snap = st.Snapshot() }); err != nil || snap == nil {
		return &scheduler.Snapshot{}
	}
	b.s.snap.CompareAndSwap(nil, snap)
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
	case nil, bool, string, int64, uint64, float64, int:
		return x
	}
	return fmt.Sprint(v)
}
