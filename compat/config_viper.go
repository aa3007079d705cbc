package compat

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// Config files are read with viper (file access, format dispatch by
// extension, typed parse errors), one viper instance per file, and merged
// by dask's own rules in update (canonical "_"/"-" names, later wins), which
// viper's merge does not know. Two dask semantics need help:
//
//   - null is a value in dask ("worker-ttl: null" turns the check off) but
//     viper drops nil leaves from AllSettings, so the codec below stores
//     null as nullValue and readConfigFile turns it back into nil;
//   - viper lowercases keys. dask keeps their case, but every key dask and
//     distributed define is lowercase, so only user-invented keys (or task
//     prefixes under default-task-durations spelled in capitals) differ.

// nullValue stands for YAML null while the tree is inside viper.
type nullValue struct{}

// daskYAMLCodec decodes YAML and JSON (a YAML subset, as PyYAML reads it
// for dask) into viper's map, keeping nulls. It cannot encode: the
// scheduler never writes config files.
type daskYAMLCodec struct{}

func (daskYAMLCodec) Encode(map[string]any) ([]byte, error) {
	return nil, errors.New("compat: writing dask config is not supported")
}

func (daskYAMLCodec) Decode(b []byte, v map[string]any) error {
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return err
	}
	if doc == nil {
		return nil // an empty file, as dask allows
	}
	m, ok := normalizeYAML(doc).(map[string]any)
	if !ok {
		return fmt.Errorf("the top level must be a mapping, got %T", doc)
	}
	for k, e := range m {
		v[k] = markNulls(e)
	}
	return nil
}

func markNulls(v any) any {
	switch x := v.(type) {
	case nil:
		return nullValue{}
	case map[string]any:
		for k, e := range x {
			x[k] = markNulls(e)
		}
	}
	return v
}

func unmarkNulls(v any) any {
	switch x := v.(type) {
	case nullValue:
		return nil
	case map[string]any:
		for k, e := range x {
			x[k] = unmarkNulls(e)
		}
	}
	return v
}

var configCodecs = func() viper.CodecRegistry {
	r := viper.NewCodecRegistry()
	for _, format := range []string{"yaml", "yml", "json"} {
		if err := r.RegisterCodec(format, daskYAMLCodec{}); err != nil {
			panic(err) // a programming error: the format names are fixed
		}
	}
	return r
}()

// readConfigFile loads one dask config file (YAML, or JSON by extension;
// anything else is read as YAML, as dask's yaml.safe_load would).
func readConfigFile(path string) (map[string]any, error) {
	v := viper.NewWithOptions(viper.WithCodecRegistry(configCodecs))
	v.SetConfigFile(path)
	if strings.ToLower(filepath.Ext(path)) == ".json" {
		v.SetConfigType("json")
	} else {
		v.SetConfigType("yaml")
	}
	if err := v.ReadInConfig(); err != nil {
		var parse viper.ConfigParseError
		if errors.As(err, &parse) {
			return nil, fmt.Errorf("dask config file %s is malformed: %w", path, err)
		}
		return nil, fmt.Errorf("read dask config %s: %w", path, err)
	}
	return unmarkNulls(v.AllSettings()).(map[string]any), nil
}
