package compat

import _ "embed"

// The host's scheduler plugin and preload module (host_plugins.py):
// Scheduler.plugins, add_plugin / remove_plugin, register_scheduler_plugin,
// the hook events' dispatch to the plugins, and preloads. It installs
// after the host core and its dask_scheduler object, which it extends.

//go:embed host_plugins.py
var hostPluginsPy string

func init() {
	hostModules = append(hostModules, pySource{"host_plugins", hostPluginsPy})
}
