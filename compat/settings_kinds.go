package compat

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/viper"

	"daskgo/scheduler"
)

// A setting binds a dask key to a field (a pointer into SchedulerSettings)
// through a kind: how dask spells the value, both ways.
type setting struct {
	key   string
	kind  kind
	field any
}

// kind converts a field to its dask spelling (for viper's defaults; nil
// is null, which is no default at all) and a dask value to the field,
// reporting a bad value through the reader.
type kind struct {
	dask func(field any) any
	read func(r *reader, key string, field any)
}

var (
	// saturationKind mirrors SchedulerState.__init__: "inf" (the only way to
	// write infinity in some config sources) or a number > 0. YAML's .inf
	// and float("inf") arrive as +Inf floats.
	saturationKind = kind{
		dask: func(f any) any { return *f.(*float64) },
		read: func(r *reader, key string, f any) { *f.(*float64) = r.saturation(key) },
	}
	boolKind = kind{
		dask: func(f any) any { return *f.(*bool) },
		read: func(r *reader, key string, f any) { *f.(*bool) = r.boolean(key) },
	}
	// notBoolKind fills the engine's No* fields, whose zero is dask's true.
	notBoolKind = kind{
		dask: func(f any) any { return !*f.(*bool) },
		read: func(r *reader, key string, f any) { *f.(*bool) = !r.boolean(key) },
	}
	intKind = kind{
		dask: func(f any) any { return *f.(*int) },
		read: func(r *reader, key string, f any) { *f.(*int) = r.integer(key) },
	}
	// optIntKind is an integer whose null is the field's default, 0.
	optIntKind = kind{
		dask: func(f any) any { return nilIfZero(*f.(*int)) },
		read: func(r *reader, key string, f any) {
			if r.get(key) != nil {
				*f.(*int) = r.integer(key)
			}
		},
	}
	// depthKind: root-task-co-assignment-depth 0 or less forms no families
	// (scheduler.Off).
	depthKind = kind{
		dask: func(f any) any { return max(*f.(*int), 0) },
		read: func(r *reader, key string, f any) {
			if *f.(*int) = r.integer(key); *f.(*int) <= 0 {
				*f.(*int) = scheduler.Off
			}
		},
	}
	// failuresKind: allowed-failures 0 lets no failure pass (scheduler.Off).
	failuresKind = kind{
		dask: func(f any) any { return max(*f.(*int), 0) },
		read: func(r *reader, key string, f any) {
			n := r.integer(key)
			switch {
			case n < 0:
				r.bad(key, n, "an integer >= 0")
			case n == 0:
				n = scheduler.Off
			}
			*f.(*int) = n
		},
	}
	durationKind = kind{
		dask: func(f any) any { return *f.(*time.Duration) },
		read: func(r *reader, key string, f any) { *f.(*time.Duration) = r.duration(key) },
	}
	// optDurationKind: null, false or 0 is scheduler.Never, as distributed's
	// `if self.worker_ttl` / `if self.idle_timeout` read them.
	optDurationKind = kind{
		dask: func(f any) any {
			if d := *f.(*time.Duration); d != scheduler.Never {
				return d
			}
			return nil
		},
		read: func(r *reader, key string, f any) { *f.(*time.Duration) = r.optDuration(key) },
	}
	durationsKind = kind{
		dask: func(f any) any {
			m := map[string]any{}
			for k, d := range *f.(*map[string]time.Duration) {
				m[k] = d
			}
			return m
		},
		read: func(r *reader, key string, f any) { *f.(*map[string]time.Duration) = r.durations(key) },
	}
	bytesKind = kind{
		dask: func(f any) any { return *f.(*int64) },
		read: func(r *reader, key string, f any) { *f.(*int64) = r.bytes(key) },
	}
	bandwidthKind = kind{
		dask: func(f any) any { return int64(*f.(*float64)) },
		read: func(r *reader, key string, f any) { *f.(*float64) = float64(r.bytes(key)) },
	}
	// ammPoliciesKind fills NoAMMPolicy from the policy list.
	ammPoliciesKind = kind{
		dask: func(f any) any {
			if *f.(*bool) {
				return []any{}
			}
			return []any{map[string]any{"class": reduceReplicasClass}}
		},
		read: func(r *reader, key string, f any) { *f.(*bool) = !r.ammPolicies(key) },
	}
	compressionKind = kind{
		dask: func(f any) any {
			if c := *f.(*string); c != "" {
				return c
			}
			return false
		},
		read: func(r *reader, key string, f any) { *f.(*string) = r.compression(key) },
	}
	stringsKind = kind{
		dask: func(f any) any {
			out := []any{}
			for _, s := range *f.(*[]string) {
				out = append(out, s)
			}
			return out
		},
		read: func(r *reader, key string, f any) { *f.(*[]string) = r.strings(key) },
	}
	// stringOrStringsKind is a string (one item) or a list of strings;
	// null, "" or [] is none (distributed.preloading.process_preloads).
	stringOrStringsKind = kind{
		dask: stringsKind.dask,
		read: func(r *reader, key string, f any) { *f.(*[]string) = r.stringOrStrings(key) },
	}
	optStringKind = kind{
		dask: func(f any) any { return nilIfZero(*f.(*string)) },
		read: func(r *reader, key string, f any) { *f.(*string) = r.optString(key) },
	}
	optBoolKind = kind{
		dask: func(f any) any {
			if b := *f.(**bool); b != nil {
				return *b
			}
			return nil
		},
		read: func(r *reader, key string, f any) { *f.(**bool) = r.optBool(key) },
	}
	// anyKind passes the value on as dask config holds it (TLS versions,
	// which comm.TLSVersion checks).
	anyKind = kind{
		dask: func(f any) any { return *f.(*any) },
		read: func(r *reader, key string, f any) { *f.(*any) = r.get(key) },
	}
)

// choiceKind is one of a few strings, case-insensitively.
func choiceKind(choices ...string) kind {
	return kind{
		dask: func(f any) any { return *f.(*string) },
		read: func(r *reader, key string, f any) { *f.(*string) = r.choice(key, choices...) },
	}
}

func nilIfZero[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}

// reader converts config values, collecting one error per bad key.
type reader struct {
	v    *viper.Viper
	errs []error
}

// get is the value at key, with dask's null as nil (see nullValue).
func (r *reader) get(key string) any {
	return unmarkNulls(r.v.Get(key))
}

func (r *reader) bad(key string, v any, accepted string) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s is not %s", key, pyRepr(v), accepted))
}

func (r *reader) saturation(key string) float64 {
	v := r.get(key)
	if s, ok := v.(string); ok {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "inf", ".inf", "+inf", "infinity":
			return math.Inf(1)
		}
	}
	f, ok := number(v)
	if !ok || !(f > 0) {
		r.bad(key, v, `a number > 0 or "inf"`)
		return 0
	}
	return f
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, !math.IsNaN(x)
	}
	return 0, false
}

func (r *reader) integer(key string) int {
	v := r.get(key)
	f, ok := number(v)
	if !ok || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		r.bad(key, v, "an integer")
		return 0
	}
	return int(f)
}

// optString is a string or null ("").
func (r *reader) optString(key string) string {
	v := r.get(key)
	if v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.bad(key, v, "a string or null")
	}
	return s
}

// optBool is a boolean or null (nil).
func (r *reader) optBool(key string) *bool {
	if r.get(key) == nil {
		return nil
	}
	b := r.boolean(key)
	return &b
}

// strings is a list of strings.
func (r *reader) strings(key string) []string {
	v := r.get(key)
	list, ok := v.([]any)
	if !ok {
		r.bad(key, v, "a list of strings")
		return nil
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			r.bad(key, v, "a list of strings")
			return nil
		}
		out = append(out, s)
	}
	return out
}

// boolean accepts YAML 1.1's yes/no/on/off too: dask reads files with
// PyYAML, which treats them as booleans.
// stringOrStrings is a string (one item) or a list of strings; null or
// absent is none.
func (r *reader) stringOrStrings(key string) []string {
	switch v := r.get(key).(type) {
	case nil:
		return nil
	case string:
		if v == "" {
			return nil
		}
		return []string{v}
	}
	if l := r.strings(key); len(l) > 0 {
		return l
	}
	return nil // [] as absent, like the built-in defaults
}

func (r *reader) boolean(key string) bool {
	v := r.get(key)
	switch x := v.(type) {
	case bool:
		return x
	case string:
		switch strings.ToLower(x) {
		case "true", "yes", "on":
			return true
		case "false", "no", "off":
			return false
		}
	}
	r.bad(key, v, "true or false")
	return false
}

func (r *reader) duration(key string) time.Duration {
	v := r.get(key)
	d, err := ParseTimedelta(v)
	if err != nil {
		r.bad(key, v, `a duration such as "500ms", "30s", "5 minutes" or a number of seconds`)
	}
	return d
}

// optDuration is a duration where null, false or 0 means never.
func (r *reader) optDuration(key string) time.Duration {
	switch r.get(key) {
	case nil, false:
		return scheduler.Never
	}
	d := r.duration(key)
	switch {
	case d < 0:
		r.bad(key, d.String(), "a duration >= 0")
	case d == 0:
		return scheduler.Never
	}
	return d
}

// durations reads a mapping of task prefix to duration. Its keys are read
// one by one: viper's Get of the mapping would return the highest layer's
// mapping alone, where dask merges the layers key by key.
func (r *reader) durations(key string) map[string]time.Duration {
	out := map[string]time.Duration{}
	switch v := r.get(key); v.(type) {
	case nil:
		return out
	case map[string]any:
	default:
		r.bad(key, v, "a mapping of task prefix to duration")
		return out
	}
	prefix := key + "."
	for _, k := range r.v.AllKeys() {
		name, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		pv := r.get(k)
		d, err := ParseTimedelta(pv)
		if err != nil {
			r.bad(k, pv, "a duration")
		}
		out[name] = d
	}
	return out
}

// reduceReplicasClass is the one AMM policy scheduler/amm.go implements.
const reduceReplicasClass = "distributed.active_memory_manager.ReduceReplicas"

// ammPolicies reads the AMM's policy list (ActiveMemoryManagerExtension.
// __init__ imports each entry's class and passes its other keys to the
// constructor) and reports whether ReduceReplicas is in it. Any other
// policy, or arguments ReduceReplicas does not take, is an error naming
// it: a scheduler that silently ran a different AMM than configured would
// hold different memory than its user expects.
func (r *reader) ammPolicies(key string) bool {
	v := r.get(key)
	list, ok := v.([]any)
	if !ok {
		if v != nil {
			r.bad(key, v, "a list of policies")
		}
		return false
	}
	found := false
	for i, item := range list {
		ikey := fmt.Sprintf("%s[%d]", key, i)
		p, ok := item.(map[string]any)
		if !ok {
			r.bad(ikey, item, `a mapping with a "class" key`)
			continue
		}
		class, _ := p["class"].(string)
		if class != reduceReplicasClass {
			r.bad(ikey+".class", p["class"], reduceReplicasClass+" (the only active memory manager policy this scheduler implements)")
			continue
		}
		if len(p) > 1 {
			r.bad(ikey, item, "ReduceReplicas without arguments (it takes none)")
			continue
		}
		found = true
	}
	return found
}

func (r *reader) bytes(key string) int64 {
	v := r.get(key)
	n, err := parseBytes(v)
	if err != nil {
		r.bad(key, v, `a byte size such as 1000000, "100 MB" or "1 KiB"`)
	}
	return n
}

// choice is one of a few strings, case-insensitively.
func (r *reader) choice(key string, choices ...string) string {
	v := r.get(key)
	if s, ok := v.(string); ok {
		for _, c := range choices {
			if strings.EqualFold(strings.TrimSpace(s), c) {
				return c
			}
		}
	}
	r.bad(key, v, "one of "+strings.Join(choices, ", "))
	return choices[0]
}

// compression accepts what distributed accepts and Go can do: false/null
// (none), "auto" (lz4, as Python resolves it where lz4 is installed), "lz4".
func (r *reader) compression(key string) string {
	v := r.get(key)
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		if !x {
			return ""
		}
	case string:
		switch strings.ToLower(x) {
		case "", "false", "none", "null":
			return ""
		case "auto", "lz4":
			return "lz4"
		}
	}
	r.bad(key, v, `one of false, null, "auto", "lz4" (dask-go-scheduler implements lz4 only)`)
	return ""
}
