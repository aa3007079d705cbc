package server

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// handlers is the RPC table (Scheduler.__init__'s self.handlers): the
// implemented handlers, and for every op marked unsupported in Ops
// (ops.go) one that fails with a message naming the feature and why. The
// ops of rawHandlers are not in it: each op is registered once.
func (s *Server) handlers() map[string]comm.Handler {
	h := s.implementedHandlers()
	raw := s.rawHandlers()
	for _, op := range Ops {
		if op.Kind == "rpc" && op.Status == StatusUnsupported && h[op.Op] == nil && raw[op.Op] == nil {
			h[op.Op] = unsupported(op)
		}
	}
	return h
}

// rawHandlers serve ops read from the undecoded request where it is a
// plain one-frame dict (comm.Server.LazyHandlers): the op that arrives
// from every worker every heartbeat interval. Each also serves its op's
// requests that came decoded.
func (s *Server) rawHandlers() map[string]comm.Handler {
	return map[string]comm.Handler{"heartbeat_worker": s.heartbeatWorker}
}

// implementedHandlers are the RPC ops with a real handler. TestOpsTable
// checks that no op Ops marks unsupported is among them.
func (s *Server) implementedHandlers() map[string]comm.Handler {
	h := map[string]comm.Handler{
		"identity":        s.identity,
		"echo":            comm.Echo,
		"feed":            s.feed,
		"register-client": s.registerClient,
		"register-worker": s.registerWorker,
		"register_nanny":  s.registerNanny,
		"unregister":      s.unregister,
		"gather":          s.gather,
		"scatter":         s.scatter,
		"update_data":     s.updateData,
		"who_has":         s.whoHas,
		"has_what":        s.hasWhat,
		"ncores":          s.ncores(false),
		"ncores_running":  s.ncores(true),
		"processing":      s.processing,
		"retry":           s.retry,
		"versions":        s.versions,
		"broadcast":       s.broadcast,
		"proxy":           s.proxy,
		"terminate":       s.terminate,
		"run_function":    s.runFunction,
		"restart":         s.restart,
		"add_keys":        s.addKeysRPC,
		"get_story":       s.getStory,

		"adaptive_target":         s.adaptiveTarget,
		"workers_to_close":        s.workersToClose,
		"check_idle":              s.checkIdle,
		"subscribe_worker_status": s.subscribeWorkerStatus,

		"log_event":             s.logEvent,
		"events":                s.events,
		"get_task_stream":       s.taskStream,
		"get_task_stream_index": s.taskStreamIndex,
		"logs":                  s.logs,
		"get_logs":              s.logs,
		"worker_logs":           s.workerLogs,

		"register_worker_plugin":      s.registerPlugin(workerPluginOps),
		"unregister_worker_plugin":    s.unregisterPlugin(workerPluginOps),
		"register_nanny_plugin":       s.registerPlugin(nannyPluginOps),
		"unregister_nanny_plugin":     s.unregisterPlugin(nannyPluginOps),
		"register_scheduler_plugin":   s.registerSchedulerPlugin,
		"unregister_scheduler_plugin": s.unregisterSchedulerPlugin,

		"replicate":      s.replicate,
		"rebalance":      s.rebalance,
		"retire_workers": s.retireWorkers,

		"shuffle_get_or_create": s.shuffleGetOrCreate,
		"shuffle_get":           s.shuffleGet,
		"shuffle_barrier":       s.shuffleBarrier,
		"shuffle_restrict_task": s.shuffleRestrictTask,
	}
	for op, handler := range s.coordinationHandlers() {
		h[op] = handler
	}
	for op, handler := range s.diagnosticsHandlers() {
		h[op] = handler
	}
	return h
}

func unsupported(op OpInfo) comm.Handler {
	return func(_ context.Context, req *comm.Request) (any, error) {
		return nil, errors.New(op.unsupportedMessage())
	}
}

func (s *Server) identity(ctx context.Context, req *comm.Request) (any, error) {
	n := -1
	if v, ok := req.Args.Get("n_workers").(int64); ok {
		n = int(v)
	}
	var out *protocol.Map
	var fp scheduler.Footprint
	err := s.loop.query(ctx, func(st *scheduler.State) { out, fp = st.Identity(n), st.Footprint() })
	if err != nil {
		return nil, err
	}
	out.Set("daskgo", s.processStats(fp)) // ours: stock clients keep extra keys
	return out, nil
}

// heartbeatWorker is Scheduler.heartbeat_worker, read from the undecoded
// request (heartbeatFast) and answered from the goroutine that read it;
// a request that came decoded, or holds what heartbeatFast does not
// expect, is read field by field, which names a bad field.
func (s *Server) heartbeatWorker(ctx context.Context, req *comm.Request) (any, error) {
	if hb, ok := heartbeatFast(req.Raw); ok {
		return s.answerHeartbeat(ctx, hb)
	}
	if err := req.DecodeArgs(); err != nil {
		return nil, err
	}
	f := &fields{op: req.Op, m: req.Args}
	addr := f.str("address")
	metrics := f.mapOf("metrics")
	executing := map[protocol.Key]float64{}
	addExecuting(executing, f.mapOf("executing"))
	if f.err != nil {
		return nil, f.err
	}
	hb := &scheduler.WorkerHeartbeat{Worker: addr, Executing: executing, SpanMetrics: heartbeatSpans(req.Args.Get("extensions"))}
	if metrics != nil {
		hb.Metrics = metrics
		hb.Bandwidth, hb.HasBandwidth = toFloat(lookupPath(metrics, "bandwidth", "total"))
		hb.Memory = heartbeatMemory(metrics)
	}
	return s.answerHeartbeat(ctx, hb)
}

// answerHeartbeat runs a heartbeat through the engine on the calling
// goroutine (loop.callNow) and returns the engine's reply.
func (s *Server) answerHeartbeat(ctx context.Context, hb *scheduler.WorkerHeartbeat) (any, error) {
	hb.Base = s.base("heartbeat")
	return s.loop.callNow(ctx, func(id int64) scheduler.Stimulus {
		hb.ReplyTo = id
		return hb
	})
}

// addExecuting adds Worker.heartbeat's executing {key: seconds so far}.
func addExecuting(into map[protocol.Key]float64, m *protocol.Map) {
	for _, e := range m.Items() {
		if k, err := protocol.KeyOf(e.Key); err == nil {
			d, _ := e.Value.(float64)
			into[k] = d
		}
	}
}

func (s *Server) unregister(ctx context.Context, req *comm.Request) (any, error) {
	addr, _ := req.Args.Get("address").(string)
	known := false
	if err := s.loop.query(ctx, func(st *scheduler.State) { known = st.Worker(addr) != nil }); err != nil {
		return nil, err
	}
	if !known {
		return "already-removed", nil
	}
	st := &scheduler.RemoveWorker{Base: s.base("unregister"), Worker: addr, Reason: "unregister"}
	if id, ok := req.Args.Get("stimulus_id").(string); ok && id != "" {
		st.ID = id
	}
	if err := s.loop.submitWait(ctx, st); err != nil {
		return nil, err
	}
	s.dropWorkerStream(addr)
	return "OK", nil
}

func (s *Server) whoHas(ctx context.Context, req *comm.Request) (any, error) {
	keys, err := protocol.KeysOf(req.Args.Get("keys"))
	if err != nil {
		return nil, fmt.Errorf("who_has: %w", err)
	}
	var wh map[protocol.Key][]string
	err = s.loop.query(ctx, func(st *scheduler.State) { wh = st.WhoHas(keys) })
	return wh, err
}

func (s *Server) hasWhat(ctx context.Context, req *comm.Request) (any, error) {
	workers := optionalStrings(req.Args.Get("workers"))
	var hw map[string][]protocol.Key
	if err := s.loop.query(ctx, func(st *scheduler.State) { hw = st.HasWhat(workers) }); err != nil {
		return nil, err
	}
	return workerKeyLists(hw), nil
}

func (s *Server) processing(ctx context.Context, req *comm.Request) (any, error) {
	workers := optionalStrings(req.Args.Get("workers"))
	var p map[string][]protocol.Key
	if err := s.loop.query(ctx, func(st *scheduler.State) { p = st.Processing(workers) }); err != nil {
		return nil, err
	}
	return workerKeyLists(p), nil
}

func (s *Server) ncores(runningOnly bool) comm.Handler {
	return func(ctx context.Context, req *comm.Request) (any, error) {
		workers := optionalStrings(req.Args.Get("workers"))
		var n map[string]int64
		err := s.loop.query(ctx, func(st *scheduler.State) { n = st.NThreads(workers, runningOnly) })
		return n, err
	}
}

// retry is Scheduler.stimulus_retry. Client._retry sets each future named
// in the reply back to pending when it reads it, so the reply must reach
// the client before any key-in-memory of theirs: the client's stream is
// held from before the Retry applies until the reply is written (doc.go's
// ordering rule).
func (s *Server) retry(ctx context.Context, req *comm.Request) (any, error) {
	keys, err := protocol.KeysOf(req.Args.Get("keys"))
	if err != nil {
		return nil, fmt.Errorf("retry: %w", err)
	}
	client, _ := req.Args.Get("client").(string)
	if b := s.clientStream(client); b != nil {
		b.Hold()
		defer b.Release()
	}
	order, err := s.loop.call(ctx, func(id int64) scheduler.Stimulus {
		return &scheduler.Retry{Base: s.base("retry"), Client: client, Keys: keys, ReplyTo: id}
	})
	if err != nil {
		return nil, err
	}
	req.SkipReply()
	if req.Reply {
		if err := req.Conn.Write(order); err != nil {
			return nil, fmt.Errorf("retry: writing the reply: %w", err)
		}
	}
	return nil, nil
}

func (s *Server) versions(ctx context.Context, _ *comm.Request) (any, error) {
	v, err := s.mat.Versions(ctx)
	if err != nil {
		return nil, fmt.Errorf("versions: %w", err)
	}
	return v, nil
}

func (s *Server) terminate(_ context.Context, req *comm.Request) (any, error) {
	req.Log.Info().Msg("terminate requested")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
	return nil, nil
}

// addKeysRPC is the add_keys RPC (a worker reporting replicas directly).
func (s *Server) addKeysRPC(ctx context.Context, req *comm.Request) (any, error) {
	keys, err := protocol.KeysOf(req.Args.Get("keys"))
	if err != nil {
		return nil, fmt.Errorf("add_keys: %w", err)
	}
	worker, _ := req.Args.Get("worker").(string)
	err = s.loop.submitWait(ctx, &scheduler.AddKeys{Base: s.base("add-keys"), Worker: worker, Keys: keys})
	return "OK", err
}

func optionalStrings(v any) []string {
	f := &fields{op: "workers", m: protocol.NewMap("w", v)}
	out := f.strings("w")
	if f.err != nil {
		return nil
	}
	return out
}

// workerKeyLists encodes {addr: [keys]} with addresses sorted.
func workerKeyLists(m map[string][]protocol.Key) *protocol.Map {
	addrs := make([]string, 0, len(m))
	for a := range m {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	out := &protocol.Map{}
	for _, a := range addrs {
		out.Entries = append(out.Entries, protocol.Entry{Key: a, Value: m[a]})
	}
	return out
}
