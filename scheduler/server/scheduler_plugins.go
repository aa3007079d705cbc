package server

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// Scheduler plugins (Scheduler.register_scheduler_plugin,
// unregister_scheduler_plugin, add_plugin from a preload or a
// run_on_scheduler function) live in the scheduler-side Python host
// (compat/host_plugins.py). Go keeps only their names, to say which were
// lost when the host dies, and which hooks they define, to turn exactly
// those of the engine's hook events on (SetHookListener). The events reach
// the host through the bounded queue of hooks.go.
//
// The host reports its plugins after every change (message "plugins"), and
// in its answer to register_scheduler_plugin and preload, which apply
// before the reply goes out: a client that registered a plugin and then
// submits a graph finds the plugin listening to it, as in distributed.

// schedulerPlugins is the Go side's view of the host's plugins.
type schedulerPlugins struct {
	mu    sync.Mutex // serializes state changes and the stimuli they send; never held by an engine lock holder
	names []string
	hooks scheduler.HookMask
	seq   int64 // the host's report last applied (host_plugins.py _Plugins.seq); 0 after a host exit
	queue *hookQueue
}

// startSchedulerPlugins wires the plugin services into the host and starts
// the hook pump (a goroutine of the server's, ending with it).
func (s *Server) startSchedulerPlugins() {
	p := &s.splugins
	p.queue = newHookQueue(hookQueueMax)
	s.host.Serve("plugins", func(ctx context.Context, args *protocol.Map) (any, error) {
		s.applyPluginState(ctx, args, false)
		return nil, nil
	})
	s.host.OnExit(s.pluginsLost)
	s.goRun(func() { pumpHooks(s.ctx, p.queue, s.host, s.clock, s.log) })
}

// applyPluginState records the host's plugins ({"names", "hooks"}) and
// sets the engine's listener to their hooks; with wait, it returns once
// the listener is set.
func (s *Server) applyPluginState(ctx context.Context, st *protocol.Map, wait bool) {
	if st == nil || st.Get("names") == nil {
		return
	}
	p := &s.splugins
	p.mu.Lock()
	defer p.mu.Unlock()
	seq, _ := st.Get("seq").(int64)
	if seq < p.seq {
		return // an older report, overtaken (each host message is served on a goroutine of its own)
	}
	p.seq = seq
	p.names = stringsOf(st.Get("names"))
	p.hooks = hookMaskOf(stringsOf(st.Get("hooks")))
	stim := &scheduler.SetHookListener{Base: s.base("plugin-hooks"), Hooks: p.hooks}
	if !wait {
		s.loop.submit(stim) // under p.mu: the listener follows the host's changes in order
		return
	}
	if err := s.loop.submitWait(ctx, stim); err != nil {
		s.log.Warn().Err(err).Msg("scheduler plugin hooks not set")
	}
}

// pluginsLost runs when the host exits: its plugins are gone, so nothing
// listens any more; the log names them.
func (s *Server) pluginsLost(pid int, status string) {
	p := &s.splugins
	p.mu.Lock()
	defer p.mu.Unlock()
	dropped := p.queue.reset()
	if len(p.names) > 0 {
		s.log.Error().Int("host_pid", pid).Str("status", status).Strs("plugins", p.names).Int("events_dropped", dropped).
			Msgf("scheduler plugins lost with the Python host: %s; register them again", strings.Join(p.names, ", "))
	}
	p.names, p.hooks, p.seq = nil, 0, 0
	s.loop.submit(&scheduler.SetHookListener{Base: s.base("plugin-hooks"), Hooks: 0})
}

// pushHooks queues an outbox's hook events for the host. Under the
// engine's lock: it never waits (hookQueue.push).
func (s *Server) pushHooks(evs []scheduler.HookEvent) {
	if q := s.splugins.queue; q != nil {
		q.push(evs, s.clock.Now())
	}
}

// SchedulerPluginNames lists the plugins the host holds, as last reported.
func (s *Server) SchedulerPluginNames() []string {
	p := &s.splugins
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.names...)
}

// registerSchedulerPlugin is Scheduler.register_scheduler_plugin: the host
// loads the plugin, awaits its start(scheduler) and adds it. The scheduler
// half of Client.upload_file (SchedulerUploadFile) goes the same way: its
// start() calls the host's upload_file, which writes and imports the file
// and makes the graph helpers import it too (compat/uploads.py), so that a
// graph naming the uploaded module unpickles.
func (s *Server) registerSchedulerPlugin(ctx context.Context, req *comm.Request) (any, error) {
	plugin := req.Args.Get("plugin")
	if plugin == nil {
		return nil, fmt.Errorf("register_scheduler_plugin: no plugin")
	}
	f := &fields{op: req.Op, m: req.Args}
	name, idempotent := f.str("name"), f.bool("idempotent")
	if f.err != nil {
		return nil, f.err
	}
	var nameArg any
	if name != "" {
		nameArg = name
	}
	ans, err := s.host.Call(ctx, "register_scheduler_plugin",
		protocol.NewMap("plugin", plugin, "name", nameArg, "idempotent", idempotent))
	if err != nil {
		return nil, fmt.Errorf("register_scheduler_plugin: %w", err)
	}
	if ans.Get("status") != "OK" {
		ans.Set("status", "uncaught-error") // start() raised: the client raises it (Server._handle_comm)
		return ans, nil
	}
	s.applyPluginState(ctx, asMap(ans.Get("result")), true)
	req.Log.Info().Str("plugin", name).Msg("scheduler plugin registered in the Python host")
	return nil, nil
}

// unregisterSchedulerPlugin is Scheduler.unregister_scheduler_plugin
// (remove_plugin, without close()).
func (s *Server) unregisterSchedulerPlugin(ctx context.Context, req *comm.Request) (any, error) {
	name, _ := req.Args.Get("name").(string)
	if s.host.PID() == 0 {
		return nil, fmt.Errorf("ValueError: Could not find plugin %q among the current scheduler plugins", name)
	}
	ans, err := s.host.Call(ctx, "unregister_scheduler_plugin", protocol.NewMap("name", name))
	if err != nil {
		return nil, fmt.Errorf("unregister_scheduler_plugin: %w", err)
	}
	if ans.Get("status") != "OK" {
		ans.Set("status", "uncaught-error")
		return ans, nil
	}
	s.applyPluginState(ctx, asMap(ans.Get("result")), true)
	return nil, nil
}

func asMap(v any) *protocol.Map {
	m, _ := v.(*protocol.Map)
	return m
}

func stringsOf(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func hookMaskOf(names []string) scheduler.HookMask {
	var m scheduler.HookMask
	for _, n := range names {
		for h := scheduler.HookTransition; h <= scheduler.HookLogEvent; h++ {
			if h.String() == n {
				m |= 1 << h
			}
		}
	}
	return m
}

// The Scheduler members preloads and plugins call synchronously that Go
// answers (dask-gateway's preload: workers_to_close in its heartbeat,
// adaptive_target in its adaptive loop); host_plugins.py adds them to
// dask_scheduler.
func init() {
	for _, op := range []string{"workers_to_close", "adaptive_target"} {
		hostRPCOps[op] = true
	}
}
