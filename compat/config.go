package compat

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file reads dask configuration the way dask/config.py does, so that a
// deployment's existing dask YAML files and DASK_* variables configure the Go
// scheduler too:
//
//	defaults (settings.go) < /etc/dask (or $DASK_ROOT_CONFIG) < ~/.config/dask
//	  < $DASK_CONFIG (dir or file) < --config FILE < DASK_* environment
//
// dask also reads <sys.prefix>/etc/dask and site.PREFIXES; a Go binary has
// no Python prefix, so those are not searched (pass them in Paths if needed).
// Merging follows dask.config.update: nested dicts merge, later wins, and a
// key spelled with "_" or "-" lands on whichever spelling already exists
// (dask.config.canonical_name).

// ConfigSources says where to read dask configuration from.
type ConfigSources struct {
	// Paths are files or directories, lowest priority first. Nil means
	// DefaultConfigPaths(Env).
	Paths []string
	// File is an explicit --config file, above every path.
	File string
	// Env is the environment as KEY=VALUE entries; nil means os.Environ().
	Env []string
}

// DaskConfig is a merged dask configuration tree (maps of string keys).
type DaskConfig struct {
	tree map[string]any
}

// DefaultConfigPaths mirrors dask.config._get_paths without the Python
// prefixes: $DASK_ROOT_CONFIG (default /etc/dask), ~/.config/dask, then
// $DASK_CONFIG if set. A path listed twice keeps its last position.
func DefaultConfigPaths(env []string) []string {
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

// LoadDaskConfig merges defaults, YAML/JSON files and DASK_* variables.
func LoadDaskConfig(src ConfigSources) (*DaskConfig, error) {
	if src.Env == nil {
		src.Env = os.Environ()
	}
	if src.Paths == nil {
		src.Paths = DefaultConfigPaths(src.Env)
	}
	cfg := &DaskConfig{tree: map[string]any{}}
	defaults, err := parseYAML("built-in defaults", []byte(defaultsYAML))
	if err != nil {
		return nil, err
	}
	update(cfg.tree, defaults)
	files, err := configFiles(src.Paths)
	if err != nil {
		return nil, err
	}
	if src.File != "" {
		if _, err := os.Stat(src.File); err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		files = append(files, src.File)
	}
	for _, f := range files {
		tree, err := readConfigFile(f)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				continue // dask ignores unreadable files
			}
			return nil, err
		}
		update(cfg.tree, tree)
	}
	envTree, err := collectEnv(src.Env)
	if err != nil {
		return nil, err
	}
	update(cfg.tree, envTree)
	return cfg, nil
}

// configFiles expands directories into their *.yaml, *.yml and *.json
// files, sorted by name (dask.config.collect_yaml); missing paths are skipped.
func configFiles(paths []string) ([]string, error) {
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
	return out, nil
}

// parseYAML loads one config document; like dask, the top level must be a
// mapping (or empty).
func parseYAML(name string, data []byte) (map[string]any, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("dask config file %s is malformed: %w", name, err)
	}
	if v == nil {
		return map[string]any{}, nil
	}
	m, ok := normalizeYAML(v).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("dask config file %s is malformed: the top level must be a mapping, got %T", name, v)
	}
	return m, nil
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

// canonicalName is dask.config.canonical_name: the spelling (with "_" or
// "-") that already exists in d, else k.
func canonicalName(k string, d map[string]any) string {
	if _, ok := d[k]; ok {
		return k
	}
	alt := strings.ReplaceAll(k, "-", "_")
	if strings.Contains(k, "_") {
		alt = strings.ReplaceAll(k, "_", "-")
	}
	if _, ok := d[alt]; ok {
		return alt
	}
	return k
}

// update is dask.config.update with priority "new".
func update(old, new map[string]any) {
	for k, v := range new {
		k = canonicalName(k, old)
		if sub, ok := v.(map[string]any); ok {
			dst, ok := old[k].(map[string]any)
			if !ok {
				dst = map[string]any{}
				old[k] = dst
			}
			update(dst, sub)
			continue
		}
		old[k] = v
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
		tree, err := parseYAML("DASK_INTERNAL_INHERIT_CONFIG", data)
		if err != nil {
			return nil, err
		}
		update(out, tree)
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

// Get returns the value at a dotted key such as
// "distributed.scheduler.worker-saturation" (dask.config.get).
func (c *DaskConfig) Get(key string) (any, bool) {
	var cur any = c.tree
	for _, part := range strings.Split(key, ".") {
		d, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = d[canonicalName(part, d)]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}
