package compat

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// What viper does not do the way dask does, and how it is taught:
//
//   - dask.config.update puts a key spelled with "_" or "-" on whichever
//     spelling the merged configuration already has (canonical_name), so
//     "worker_ttl" in a file sets distributed.yaml's "worker-ttl". The codec
//     renames each decoded key so (daskTree) before viper merges it.
//   - null is a value in dask ("worker-ttl: null" turns the check off), but
//     viper treats a nil leaf as absent and reads the layer below. The codec
//     stores null as nullValue; reader.get turns it back into nil.
//   - viper lowercases keys. dask keeps their case, but every key dask and
//     distributed define is lowercase, so only user-invented keys (or task
//     prefixes under default-task-durations spelled in capitals) differ.

// nullValue stands for dask's null while the tree is inside viper.
type nullValue struct{}

// daskCodec decodes YAML and JSON (a YAML subset, as PyYAML reads it for
// dask) into viper's map, in dask's spelling against the configuration
// merged so far (v). It cannot encode: the scheduler never writes config
// files.
type daskCodec struct{ v *viper.Viper }

func (daskCodec) Encode(map[string]any) ([]byte, error) {
	return nil, errors.New("compat: writing dask config is not supported")
}

func (c daskCodec) Decode(b []byte, out map[string]any) error {
	tree, err := decodeYAML(b)
	if err != nil {
		return err
	}
	for k, e := range daskTree(c.v, tree) {
		out[k] = e
	}
	return nil
}

// newDaskViper is a viper instance whose files decode with daskCodec.
func newDaskViper() *viper.Viper {
	codec := &daskCodec{}
	reg := viper.NewCodecRegistry()
	for _, format := range []string{"yaml", "json"} {
		if err := reg.RegisterCodec(format, codec); err != nil {
			panic(err) // a programming error: the format names are fixed
		}
	}
	v := viper.NewWithOptions(viper.WithCodecRegistry(reg))
	codec.v = v
	return v
}

// mergeFile merges one dask config file into v (YAML, or JSON by
// extension; anything else is read as YAML, as dask's yaml.safe_load
// would). An unreadable file is skipped, as dask skips it.
func mergeFile(v *viper.Viper, path string) error {
	v.SetConfigFile(path)
	if strings.ToLower(filepath.Ext(path)) == ".json" {
		v.SetConfigType("json")
	} else {
		v.SetConfigType("yaml")
	}
	err := v.MergeInConfig()
	var parse viper.ConfigParseError
	switch {
	case err == nil, errors.Is(err, fs.ErrPermission):
		return nil
	case errors.As(err, &parse):
		return fmt.Errorf("dask config file %s is malformed: %w", path, err)
	}
	return fmt.Errorf("read dask config %s: %w", path, err)
}

// decodeYAML loads one config document; like dask, the top level must be
// a mapping (or empty).
func decodeYAML(b []byte) (map[string]any, error) {
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if doc == nil {
		return map[string]any{}, nil // an empty file, as dask allows
	}
	m, ok := normalizeYAML(doc).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the top level must be a mapping, got %T", doc)
	}
	return m, nil
}

// daskTree is tree as dask.config.update would merge it into v: each key
// in the spelling v already has (canonicalName, level by level), nulls
// marked.
func daskTree(v *viper.Viper, tree map[string]any) map[string]any {
	return canonicalTree(tree, v.AllSettings())
}

func canonicalTree(tree, have map[string]any) map[string]any {
	out := make(map[string]any, len(tree))
	for k, e := range tree {
		k = canonicalName(strings.ToLower(k), have)
		switch x := e.(type) {
		case nil:
			e = nullValue{}
		case map[string]any:
			sub, _ := have[k].(map[string]any)
			e = canonicalTree(x, sub)
		}
		out[k] = e
	}
	return out
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

// unmarkNulls is v with nullValue turned back into nil, in what it holds
// too. Maps and lists are copied: they may be viper's own.
func unmarkNulls(v any) any {
	switch x := v.(type) {
	case nullValue:
		return nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = unmarkNulls(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = unmarkNulls(e)
		}
		return out
	}
	return v
}
