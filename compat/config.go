package compat

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/viper"
)

// This file reads dask configuration the way dask/config.py does, so that a
// deployment's existing dask YAML files and DASK_* variables configure the Go
// scheduler too, into a viper instance, layer by layer:
//
//	defaults (DefaultSettings, viper.SetDefault) < /etc/dask (or $DASK_ROOT_CONFIG)
//	  < ~/.config/dask < $DASK_CONFIG (dir or file) < --config FILE
//	  < DASK_* environment (viper.MergeConfigMap)
//
// Files are merged with viper.MergeInConfig. dask also reads
// <sys.prefix>/etc/dask and site.PREFIXES; a Go binary has no Python
// prefix, so those are not searched (pass them in Paths if needed). What
// viper does not know of dask's rules is in config_viper.go: a key spelled
// with "_" or "-" lands on whichever spelling already exists
// (dask.config.canonical_name), and null is a value.

// ConfigSources says where to read dask configuration from.
type ConfigSources struct {
	// Paths are files or directories, lowest priority first. Nil means
	// ConfigSearchPaths(Env).
	Paths []string
	// File is an explicit --config file, above every path.
	File string
	// Env is the environment as KEY=VALUE entries; nil means os.Environ().
	Env []string
}

// ConfigSearchPaths mirrors dask.config._get_paths without the Python
// prefixes: $DASK_ROOT_CONFIG (default /etc/dask), ~/.config/dask, then
// $DASK_CONFIG if set. A path listed twice keeps its last position.
func ConfigSearchPaths(env []string) []string {
	get := envLookup(env)
	root, ok := get("DASK_ROOT_CONFIG")
	if !ok {
		root = "/etc/dask"
	}
	paths := []string{root}
	if home, err := os.UserHomeDir(); err == nil {
		paths = append(paths, filepath.Join(home, ".config", "dask"))
	}
	if p, ok := get("DASK_CONFIG"); ok {
		paths = append(paths, p)
	}
	var out []string
	for i, p := range paths {
		if !slices.Contains(paths[i+1:], p) {
			out = append(out, p)
		}
	}
	return out
}

func envLookup(env []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
				return v, true
			}
		}
		return "", false
	}
}

// LoadConfig merges defaults, YAML/JSON files and DASK_* variables into a
// viper instance; SchedulerSettingsFrom reads it.
func LoadConfig(src ConfigSources) (*viper.Viper, error) {
	if src.Env == nil {
		src.Env = os.Environ()
	}
	if src.Paths == nil {
		src.Paths = ConfigSearchPaths(src.Env)
	}
	v := newDaskViper()
	d := DefaultSettings()
	for _, k := range d.keys() {
		val := k.kind.dask(k.field)
		if val == nil {
			val = nullValue{} // null is a value: its key's spelling is dask's
		}
		v.SetDefault(k.key, val)
	}
	files := configFiles(src.Paths)
	if src.File != "" {
		if _, err := os.Stat(src.File); err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		files = append(files, src.File)
	}
	for _, f := range files {
		if err := mergeFile(v, f); err != nil {
			return nil, err
		}
	}
	envTree, err := collectEnv(src.Env)
	if err != nil {
		return nil, err
	}
	if err := v.MergeConfigMap(daskTree(v, envTree)); err != nil {
		return nil, fmt.Errorf("merge DASK_* variables: %w", err)
	}
	return v, nil
}

// configFiles expands directories into their *.yaml, *.yml and *.json
// files, sorted by name (dask.config.collect_yaml); missing paths are skipped.
func configFiles(paths []string) []string {
	var out []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			continue
		}
		if !info.IsDir() {
			out = append(out, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			continue // dask ignores permission errors here
		}
		var names []string
		for _, e := range entries {
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".yaml", ".yml", ".json":
				names = append(names, filepath.Join(p, e.Name()))
			}
		}
		slices.Sort(names)
		out = append(out, names...)
	}
	return out
}

// normalizeYAML turns yaml's map[any]any (non-string keys) into string keys.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeYAML(e)
		}
		return x
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = normalizeYAML(e)
		}
		return x
	default:
		return v
	}
}

// collectEnv is dask.config.collect_env: DASK_A__B_C=v sets a.b_c (then
// canonicalized to a.b-c where that exists) to interpretValue(v).
// DASK_INTERNAL_INHERIT_CONFIG (base64 JSON from a parent dask process) is
// applied first.
func collectEnv(env []string) (map[string]any, error) {
	out := map[string]any{}
	if s, ok := envLookup(env)("DASK_INTERNAL_INHERIT_CONFIG"); ok {
		data, err := base64.URLEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("DASK_INTERNAL_INHERIT_CONFIG: %w", err)
		}
		tree, err := decodeYAML(data)
		if err != nil {
			return nil, fmt.Errorf("DASK_INTERNAL_INHERIT_CONFIG is malformed: %w", err)
		}
		out = tree
	}
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "DASK_") || name == "DASK_INTERNAL_INHERIT_CONFIG" {
			continue
		}
		path := strings.Split(strings.ReplaceAll(strings.ToLower(name[5:]), "__", "."), ".")
		assign(out, path, interpretValue(value))
	}
	return out, nil
}

// assign sets a nested key (dask.config.set's _assign).
func assign(d map[string]any, path []string, v any) {
	k := canonicalName(path[0], d)
	if len(path) == 1 {
		d[k] = v
		return
	}
	sub, ok := d[k].(map[string]any)
	if !ok {
		sub = map[string]any{}
		d[k] = sub
	}
	assign(sub, path[1:], v)
}
