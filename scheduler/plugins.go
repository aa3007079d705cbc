package scheduler

import "daskgo/protocol"

// Worker and nanny plugins: Scheduler.worker_plugins and nanny_plugins.
// A plugin is an opaque pickle (Client.register_plugin sends dumps(plugin));
// the scheduler never loads it. It stores it by name, the outer ring
// broadcasts it to current workers (plugin-add) or nannies (plugin_add),
// and every later register-worker / register_nanny reply carries the
// stored ones (worker-plugins / nanny-plugins), so workers that join later
// run the plugin's setup too.

// PluginKind says whether a plugin is for workers or nannies.
type PluginKind uint8

// Plugin kinds.
const (
	WorkerPlugin PluginKind = iota
	NannyPlugin
)

// plugins keeps registration order: workers run plugins in the order of
// the dict they receive.
type plugins struct {
	worker, nanny protocol.Map
}

func (p *plugins) of(kind PluginKind) *protocol.Map {
	if kind == NannyPlugin {
		return &p.nanny
	}
	return &p.worker
}

func (s *State) dispatchPlugins(st Stimulus) {
	switch x := st.(type) {
	case *RegisterPlugin:
		s.plugins.of(x.Kind).Set(x.Name, x.Pickle)
	case *UnregisterPlugin:
		s.plugins.of(x.Kind).Delete(x.Name)
	}
}

// HasPlugin reports whether a plugin of that kind and name is stored.
func (s *State) HasPlugin(kind PluginKind, name string) bool {
	_, ok := s.plugins.of(kind).Lookup(name)
	return ok
}

// Plugins returns a copy of the stored plugins of a kind, {name: pickle}
// in registration order.
func (s *State) Plugins(kind PluginKind) *protocol.Map {
	return &protocol.Map{Entries: append([]protocol.Entry(nil), s.plugins.of(kind).Entries...)}
}
