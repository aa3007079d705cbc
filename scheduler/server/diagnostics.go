package server

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
	"daskgo/scheduler/coord"
)

// The RPCs a user reaches for when something goes wrong (memory samples,
// profiles, cluster dumps, hardware benchmarks, call stacks, task
// metadata, error causes, the memory manager, worker restarts), and the
// small queries beside them. Each concept has its file; this one holds
// the table, the queries answered from the engine in one step, and the
// fan-out they share.

// diagnosticsHandlers is added to the RPC table.
func (s *Server) diagnosticsHandlers() map[string]comm.Handler {
	return map[string]comm.Handler{
		"memory_sampler_start":      s.memorySamplerStart,
		"memory_sampler_stop":       s.memorySamplerStop,
		"profile":                   s.profile,
		"get_cluster_state":         s.getClusterState,
		"dump_cluster_state_to_url": s.dumpClusterStateToURL,
		"dump_state":                s.dumpState,
		"benchmark_hardware":        s.benchmarkHardware,
		"call_stack":                s.callStack,
		"nbytes":                    s.nbytes,
		"start_task_metadata":       s.startTaskMetadata,
		"stop_task_metadata":        s.stopTaskMetadata,
		"get_error_cause":           s.getErrorCause,
		"get_runspec":               s.getRunspec,
		"amm_handler":               s.ammHandler,
		"restart_workers":           s.restartWorkers,
		"set_resources":             s.setResources,
		"get_task_status":           s.getTaskStatus,
		"get_task_prefix_states":    s.getTaskPrefixStates,
		"performance_report":        s.performanceReport,
	}
}

// pyError is the reply of an RPC that raises a Python builtin exception
// in its caller, as distributed's handler would.
func pyError(class, format string, args ...any) any {
	return rpcResult(&coord.RemoteException{Module: "builtins", Class: class, Text: fmt.Sprintf(format, args...)})
}

// queryResult runs a query that may fail with a Python exception and
// returns its reply.
func (s *Server) queryResult(ctx context.Context, fn func(st *scheduler.State) (any, error)) (any, error) {
	var out any
	var qerr error
	if err := s.loop.query(ctx, func(st *scheduler.State) { out, qerr = fn(st) }); err != nil {
		return nil, err
	}
	if e, ok := qerr.(*coord.RemoteException); ok {
		return rpcResult(e), nil
	}
	return out, qerr
}

// optionalKeys reads a keys argument that may be None (nil, no error).
func optionalKeys(req *comm.Request, name string) ([]protocol.Key, error) {
	v := req.Args.Get(name)
	if v == nil {
		return nil, nil
	}
	keys, err := protocol.KeysOf(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", req.Op, name, err)
	}
	if keys == nil {
		keys = []protocol.Key{}
	}
	return keys, nil
}

// nbytes is Scheduler.get_nbytes.
func (s *Server) nbytes(ctx context.Context, req *comm.Request) (any, error) {
	keys, err := optionalKeys(req, "keys")
	if err != nil {
		return nil, err
	}
	summary := true
	if b, ok := req.Args.Get("summary").(bool); ok {
		summary = b
	}
	return s.queryResult(ctx, func(st *scheduler.State) (any, error) { return st.NBytes(keys, summary) })
}

// getTaskStatus is Scheduler.get_task_status.
func (s *Server) getTaskStatus(ctx context.Context, req *comm.Request) (any, error) {
	keys, err := optionalKeys(req, "keys")
	if err != nil {
		return nil, err
	}
	var out *protocol.Map
	err = s.loop.query(ctx, func(st *scheduler.State) { out = st.TaskStatuses(keys) })
	return out, err
}

// getTaskPrefixStates is Scheduler.get_task_prefix_states.
func (s *Server) getTaskPrefixStates(ctx context.Context, _ *comm.Request) (any, error) {
	var out *protocol.Map
	err := s.loop.query(ctx, func(st *scheduler.State) { out = st.PrefixStates() })
	return out, err
}

// setResources is Scheduler.add_resources (Worker.set_resources calls it
// with the worker's new totals).
func (s *Server) setResources(ctx context.Context, req *comm.Request) (any, error) {
	f := &fields{op: req.Op, m: req.Args}
	worker := f.str("worker")
	res := map[string]float64{}
	for _, e := range f.mapOf("resources").Items() {
		name, ok := e.Key.(string)
		q, isNum := toFloat(e.Value)
		if !ok || !isNum {
			return nil, fmt.Errorf("set_resources: resources must map names to numbers, got %s", protocol.String(req.Args.Get("resources")))
		}
		res[name] = q
	}
	if f.err != nil {
		return nil, f.err
	}
	var known bool
	if err := s.loop.query(ctx, func(st *scheduler.State) { known = st.Worker(worker) != nil }); err != nil {
		return nil, err
	}
	if !known { // self.workers[worker]
		return pyError("KeyError", "%s", worker), nil
	}
	return s.loop.call(ctx, func(id int64) scheduler.Stimulus {
		return &scheduler.SetResources{Base: s.base("set-resources"), Worker: worker, Resources: res, ReplyTo: id}
	})
}

// callStack is Scheduler.get_call_stack: the workers' call_stack of the
// tasks the keys lead to (all executing tasks without keys), {worker:
// {key: frames}} for the workers that had any.
func (s *Server) callStack(ctx context.Context, req *comm.Request) (any, error) {
	keys, err := optionalKeys(req, "keys")
	if err != nil {
		return nil, err
	}
	msgs := map[string]*protocol.Map{}
	v, err := s.queryResult(ctx, func(st *scheduler.State) (any, error) {
		if keys == nil {
			for _, w := range st.WorkerAddresses() {
				msgs[w] = protocol.NewMap("op", "call_stack", "keys", nil)
			}
			return nil, nil
		}
		targets, err := st.CallStackTargets(keys)
		for w, ks := range targets {
			msgs[w] = protocol.NewMap("op", "call_stack", "keys", ks)
		}
		return nil, err
	})
	if err != nil || v != nil {
		return v, err
	}
	out := &protocol.Map{}
	for _, r := range s.callEach(ctx, msgs) {
		if r.err != nil { // asyncio.gather without return_exceptions
			return nil, fmt.Errorf("call_stack on %s: %w", r.worker, r.err)
		}
		if m, ok := r.reply.(*protocol.Map); ok && m.Len() > 0 {
			out.Entries = append(out.Entries, protocol.Entry{Key: r.worker, Value: m})
		}
	}
	return out, nil
}

// callResult is one worker's answer in a fan-out.
type callResult struct {
	worker string
	reply  any
	err    error
}

// callEach sends each worker its message (reply=True) concurrently and
// returns every answer, sorted by worker, once all have answered or
// failed. The calls are joined before it returns; ctx bounds them.
func (s *Server) callEach(ctx context.Context, msgs map[string]*protocol.Map) []callResult {
	out := make([]callResult, 0, len(msgs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w, msg := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := &protocol.Map{Entries: append([]protocol.Entry(nil), msg.Entries...)}
			m.Set("reply", true)
			v, err := s.pool.Call(ctx, w, m)
			mu.Lock()
			out = append(out, callResult{worker: w, reply: v, err: err})
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].worker < out[j].worker })
	return out
}

// sameMsg is msg for each worker.
func sameMsg(workers []string, msg *protocol.Map) map[string]*protocol.Map {
	out := make(map[string]*protocol.Map, len(workers))
	for _, w := range workers {
		out[w] = msg
	}
	return out
}
