package server

import (
	"context"
	"fmt"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// Worker and nanny plugins (Scheduler.register_worker_plugin,
// register_nanny_plugin and their unregister_*). The plugin is the
// client's dumps(plugin), stored opaque by the engine and broadcast: to
// workers as plugin-add / plugin-remove, to nannies as plugin_add /
// plugin_remove. Workers and nannies that register later get the stored
// plugins in their registration reply.

type pluginOps struct {
	kind        scheduler.PluginKind
	add, remove string // the broadcast ops
	nanny       bool
	what        string // for errors: "worker plugin", "nanny plugin"
}

var (
	workerPluginOps = pluginOps{kind: scheduler.WorkerPlugin, add: "plugin-add", remove: "plugin-remove", what: "worker plugin"}
	nannyPluginOps  = pluginOps{kind: scheduler.NannyPlugin, add: "plugin_add", remove: "plugin_remove", nanny: true, what: "nanny plugin"}
)

// registerPlugin returns {} for an idempotent re-registration, else the
// {address: {"status": "OK"} or error} replies of the broadcast.
func (s *Server) registerPlugin(p pluginOps) comm.Handler {
	return func(ctx context.Context, req *comm.Request) (any, error) {
		f := &fields{op: req.Op, m: req.Args}
		name, idempotent := f.str("name"), f.bool("idempotent")
		if f.err != nil {
			return nil, f.err
		}
		plugin := req.Args.Get("plugin")
		if name == "" || plugin == nil {
			return nil, fmt.Errorf("%s: name and plugin are required", req.Op)
		}
		req.Log.Info().Str("plugin", name).Msgf("registering %s", p.what)
		var known bool
		if err := s.loop.query(ctx, func(st *scheduler.State) { known = st.HasPlugin(p.kind, name) }); err != nil {
			return nil, err
		}
		if known && idempotent {
			return &protocol.Map{}, nil
		}
		st := &scheduler.RegisterPlugin{Base: s.base("register-plugin"), Kind: p.kind, Name: name, Pickle: plugin}
		if err := s.loop.submitWait(ctx, st); err != nil {
			return nil, err
		}
		return s.broadcastMsg(ctx, protocol.NewMap("op", p.add, "plugin", plugin, "name", name), nil, p.nanny, "raise")
	}
}

func (s *Server) unregisterPlugin(p pluginOps) comm.Handler {
	return func(ctx context.Context, req *comm.Request) (any, error) {
		name, _ := req.Args.Get("name").(string)
		var known bool
		if err := s.loop.query(ctx, func(st *scheduler.State) { known = st.HasPlugin(p.kind, name) }); err != nil {
			return nil, err
		}
		if !known {
			return nil, fmt.Errorf("ValueError: The %s %s does not exist", p.what, name)
		}
		if err := s.loop.submitWait(ctx, &scheduler.UnregisterPlugin{Base: s.base("unregister-plugin"), Kind: p.kind, Name: name}); err != nil {
			return nil, err
		}
		return s.broadcastMsg(ctx, protocol.NewMap("op", p.remove, "name", name), nil, p.nanny, "raise")
	}
}

// workerPlugins is the register-worker reply's worker-plugins: the
// materializer's (the P2P shuffle plugin) then the registered ones.
func (s *Server) workerPlugins(registered *protocol.Map) *protocol.Map {
	out := &protocol.Map{}
	if base := s.mat.WorkerPlugins(); base != nil {
		out.Entries = append(out.Entries, base.Entries...)
	}
	for _, e := range registered.Entries {
		if k, ok := e.Key.(string); ok {
			out.Set(k, e.Value)
		}
	}
	return out
}
