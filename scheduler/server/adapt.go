package server

import (
	"context"
	"fmt"
	"time"

	"daskgo/comm"
	"daskgo/compat"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// The RPCs of adaptive scaling and cluster managers
// (distributed/deploy/adaptive.py, cluster.py, spec.py; the dask-kubernetes
// operator's fallbacks): adaptive_target, workers_to_close, check_idle
// and subscribe_worker_status. retire_workers is in retire.go.

// adaptiveTarget is Scheduler.adaptive_target(target_duration=None).
func (s *Server) adaptiveTarget(ctx context.Context, req *comm.Request) (any, error) {
	var d time.Duration
	if v := req.Args.Get("target_duration"); v != nil {
		var err error
		if d, err = compat.ParseTimedelta(v); err != nil {
			return nil, &fieldError{op: req.Op, field: "target_duration", want: "a duration", got: v}
		}
	}
	var n int
	err := s.loop.query(ctx, func(st *scheduler.State) { n = st.AdaptiveTarget(d) })
	return int64(n), err
}

// workersToClose is Scheduler.workers_to_close(memory_ratio, n, key,
// minimum, target, attribute). A key function is Python (a pickled
// callable, Adaptive's worker_key): refused, naming it.
func (s *Server) workersToClose(ctx context.Context, req *comm.Request) (any, error) {
	q, err := closeQuery(req)
	if err != nil {
		return nil, err
	}
	attribute := "address"
	if a, ok := req.Args.Get("attribute").(string); ok {
		attribute = a
	}
	var out []any
	err = s.loop.query(ctx, func(st *scheduler.State) {
		for _, a := range st.WorkersToClose(q) {
			if attribute == "name" { // as the worker sent it: SpecCluster matches int names
				out = append(out, st.Worker(a).NameValue)
			} else {
				out = append(out, a)
			}
		}
	})
	return out, err
}

// closeQuery decodes workers_to_close's arguments (also retire_workers'
// without workers or names).
func closeQuery(req *comm.Request) (scheduler.CloseQuery, error) {
	q := scheduler.CloseQuery{N: -1, Target: -1}
	if k := req.Args.Get("key"); k != nil {
		return q, fmt.Errorf("workers_to_close with a key function (Adaptive(worker_key=...)) is not supported by " +
			"dask-go-scheduler: the key is Python, which the Go scheduler cannot run; each worker is its own group")
	}
	f := &fields{op: req.Op, m: req.Args}
	if req.Args.Get("n") != nil {
		q.N = int(f.int("n"))
	}
	if req.Args.Get("target") != nil {
		q.Target = int(f.int("target"))
	}
	if req.Args.Get("minimum") != nil {
		q.Minimum = int(f.int("minimum"))
	}
	if req.Args.Get("memory_ratio") != nil {
		q.MemoryRatio = f.float("memory_ratio")
	}
	if a := f.str("attribute"); a != "" {
		if a != "address" && a != "name" {
			return q, fmt.Errorf("workers_to_close: attribute %q is not supported (address or name)", a)
		}
	}
	return q, f.err
}

// checkIdle is Scheduler.check_idle: when the scheduler became idle, or
// None while busy (the engine advances its idle clock on every tick).
func (s *Server) checkIdle(ctx context.Context, _ *comm.Request) (any, error) {
	since, err := s.idleSince(ctx)
	if err != nil || since == nil {
		return nil, err
	}
	return *since, nil
}

func (s *Server) idleSince(ctx context.Context) (*float64, error) {
	var t time.Time
	if err := s.loop.query(ctx, func(st *scheduler.State) { t = st.IdleSince() }); err != nil {
		return nil, err
	}
	if t.IsZero() {
		return nil, nil
	}
	secs := float64(t.UnixNano()) / 1e9
	return &secs, nil
}

// checkIdleTimeout ends the scheduler once it has been idle for the idle
// timeout (--idle-timeout, distributed.scheduler.idle-timeout), as
// check_idle does on distributed's periodic callback. Run on every tick.
func (s *Server) checkIdleTimeout(now time.Time, idleSince time.Time) {
	if s.cfg.IdleTimeout <= 0 || idleSince.IsZero() || now.Sub(idleSince) <= s.cfg.IdleTimeout {
		return
	}
	s.idleOnce.Do(func() {
		s.log.Info().Dur("idle_timeout", s.cfg.IdleTimeout).Msg("Scheduler closing after being idle")
		go func() { // owned by Shutdown, which it calls: see terminate
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
		}()
	})
}

// subscribeWorkerStatus is Scheduler.subscribe_worker_status: the reply is
// the identity (workers without metrics and last_seen), then the same
// connection carries batches of ["add", {"workers": {address: identity}}]
// and ["remove", address] until the subscriber leaves. Unlike distributed,
// where a new subscriber replaces the previous one (the plugin has one
// name), every subscriber gets the updates.
func (s *Server) subscribeWorkerStatus(ctx context.Context, req *comm.Request) (any, error) {
	conn := req.TakeOver()
	var ident *protocol.Map
	if err := s.loop.query(ctx, func(st *scheduler.State) { ident = st.Identity(-1) }); err != nil {
		return nil, err
	}
	if ws, ok := ident.Get("workers").(*protocol.Map); ok {
		for _, e := range ws.Entries {
			if w, ok := e.Value.(*protocol.Map); ok {
				stripVolatile(w)
			}
		}
	}
	if err := conn.Write(ident); err != nil {
		return nil, fmt.Errorf("subscribe_worker_status reply: %w", err)
	}
	b := comm.NewBatchedSend(conn, 0, nil)
	id := s.statusSubs.add(b)
	defer s.statusSubs.remove(id)
	// the subscriber never writes; a read returns when it hangs up
	for {
		if _, err := conn.Read(); err != nil {
			b.Abort()
			return nil, nil
		}
	}
}

// stripVolatile drops what subscribe_worker_status leaves out of a
// worker's identity.
func stripVolatile(w *protocol.Map) {
	w.Delete("metrics")
	w.Delete("last_seen")
}
