package server

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// The cluster dump's scheduler section, written as msgpack straight from
// the engine's copy (scheduler.ClusterDump) to the output, item by item:
// on 100k tasks the dump is far too big to build as a value tree first.
// The layout is Scheduler._to_dict's (recursive_to_dict of the scheduler
// and of every TaskState, WorkerState, ClientState and TaskGroup): objects
// referenced from another object are their repr ("<TaskState 'x' memory>",
// "<WorkerState 'tcp://...', name: 0, status: running, memory: 2,
// processing: 0>", "<Client 'id'>", "<inc: memory: 3>"), a tuple key is
// named by str() of its list form, and exclude drops those attribute
// names at every level, as recursive_to_dict's exclude does.
//
// What the engine does not keep is left out rather than made up: a task's
// result type and a group's durations and span; the transition log's
// recommendations are {}. Where distributed writes the repr of an object
// with nothing readable in it, the dump has the content instead: each
// event topic's events, and the extensions' state.

// dumpFlushAt is how much the encoder buffers before writing.
const dumpFlushAt = 64 << 10

type dumpEncoder struct {
	w       io.Writer
	b       []byte
	scratch []byte // a repr being built
	err     error
	d       *scheduler.ClusterDump
	exclude map[string]bool

	workerRepr map[string]string // "<WorkerState 'tcp://...', name: 0, ...>"
	groupRepr  []string          // by index in d.Groups: "<inc: memory: 3>"
	groupIndex map[string]int    // group name -> index, made when first needed
	prefixRepr map[string]string // by prefix name
}

func newDumpEncoder(w io.Writer, d *scheduler.ClusterDump, exclude map[string]bool) *dumpEncoder {
	e := &dumpEncoder{w: w, b: make([]byte, 0, dumpFlushAt+4096), d: d, exclude: exclude,
		workerRepr: map[string]string{}, prefixRepr: map[string]string{}}
	for i := range d.Workers {
		w := &d.Workers[i]
		e.workerRepr[w.Address] = fmt.Sprintf("<WorkerState %s, name: %s, status: %s, memory: %d, processing: %d>",
			pyStrRepr(w.Address), pyStr(w.NameValue), w.Status, w.HasWhat.Hi-w.HasWhat.Lo, w.Processing.Hi-w.Processing.Lo)
	}
	prefixStates := map[string]*[scheduler.NumStatus]int{}
	for i := range d.Groups {
		g := &d.Groups[i]
		e.groupRepr = append(e.groupRepr, collectionRepr(g.Name, g.States[:]))
		ps := prefixStates[g.Prefix]
		if ps == nil {
			ps = new([scheduler.NumStatus]int)
			prefixStates[g.Prefix] = ps
		}
		for st, n := range g.States {
			ps[st] += n
		}
	}
	for name, ps := range prefixStates {
		e.prefixRepr[name] = collectionRepr(name, ps[:])
	}
	return e
}

// collectionRepr is TaskGroup's and TaskPrefix's __repr__: the non-zero
// state counts, by state name.
func collectionRepr(name string, states []int) string {
	type sc struct {
		name string
		n    int
	}
	var parts []sc
	for st, n := range states {
		if n != 0 {
			parts = append(parts, sc{scheduler.StatusName(scheduler.Status(st)), n})
		}
	}
	slices.SortFunc(parts, func(a, b sc) int { return strings.Compare(a.name, b.name) })
	var b strings.Builder
	b.WriteString("<" + name + ": ")
	for i, p := range parts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", p.name, p.n)
	}
	b.WriteString(">")
	return b.String()
}

// pyStrRepr is Python's repr() of a str.
func pyStrRepr(s string) string { return protocol.StrKey(s).Repr() }

// pyStr is Python's str() of a plain value (a worker's name).
func pyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "None"
	}
	if k, err := protocol.KeyOf(v); err == nil {
		return k.Repr()
	}
	return protocol.String(v)
}

func (e *dumpEncoder) flush() {
	if e.err == nil && len(e.b) > 0 {
		_, e.err = e.w.Write(e.b)
	}
	e.b = e.b[:0]
}

func (e *dumpEncoder) maybeFlush() {
	if len(e.b) >= dumpFlushAt {
		e.flush()
	}
}

func (e *dumpEncoder) mapLen(n int)       { e.b = protocol.AppendMapLen(e.b, n) }
func (e *dumpEncoder) arrLen(n int)       { e.b = protocol.AppendArrayLen(e.b, n) }
func (e *dumpEncoder) str(s string)       { e.b = protocol.AppendStr(e.b, s) }
func (e *dumpEncoder) int(n int64)        { e.b = protocol.AppendInt(e.b, n) }
func (e *dumpEncoder) float(f float64)    { e.b = protocol.AppendFloat64(e.b, f) }
func (e *dumpEncoder) bool(v bool)        { e.b = protocol.AppendBool(e.b, v) }
func (e *dumpEncoder) null()              { e.b = protocol.AppendNil(e.b) }
func (e *dumpEncoder) key(k protocol.Key) { e.b = append(e.b, k...) }

// value writes a received value as recursive_to_dict leaves it: a dict
// key that is not a str, number, bool or None (a tuple, which arrives as a
// list: the workers' metrics digests have them) becomes str() of its list
// form, as recursive_to_dict names a key it cannot hash. Undecoded values
// (a heartbeat's metrics) are decoded first; one that cannot be written
// inline (serialized data) becomes its short description.
func (e *dumpEncoder) value(v any) {
	switch x := v.(type) {
	case protocol.Raw:
		dv, err := protocol.Decode([][]byte{x})
		if err != nil {
			e.str(fmt.Sprintf("<undecodable: %v>", err))
			return
		}
		e.value(dv)
	case *protocol.Map:
		if x == nil {
			e.null()
			return
		}
		e.mapLen(len(x.Entries))
		for _, en := range x.Entries {
			e.dictKey(en.Key)
			e.value(en.Value)
		}
	case []any:
		e.list(x)
	case protocol.Set:
		e.list(x)
	default:
		b, err := protocol.AppendValue(e.b, v)
		if err != nil {
			b = protocol.AppendStr(e.b, protocol.String(v))
		}
		e.b = b
	}
}

// dict writes a received dict, {} for none.
func (e *dumpEncoder) dict(v any) {
	if m, ok := v.(*protocol.Map); v == nil || ok && m == nil {
		e.mapLen(0)
		return
	}
	e.value(v)
}

func (e *dumpEncoder) list(items []any) {
	e.arrLen(len(items))
	for _, it := range items {
		e.value(it)
	}
}

func (e *dumpEncoder) dictKey(k any) {
	switch k.(type) {
	case string, int64, uint64, float64, bool, nil:
		e.value(k)
		return
	}
	if key, err := protocol.KeyOf(k); err == nil {
		e.str(key.ListString())
		return
	}
	e.str(protocol.String(k))
}

func (e *dumpEncoder) strOrNil(s string) {
	if s == "" {
		e.null()
		return
	}
	e.str(s)
}

func (e *dumpEncoder) strs(ss []string) {
	e.arrLen(len(ss))
	for _, s := range ss {
		e.str(s)
	}
}

func (e *dumpEncoder) strsOrNil(ss []string) {
	if len(ss) == 0 {
		e.null()
		return
	}
	e.strs(ss)
}

func (e *dumpEncoder) floats(m map[string]float64) {
	names := slices.Sorted(maps.Keys(m))
	e.mapLen(len(names))
	for _, n := range names {
		e.str(n)
		e.float(m[n])
	}
}

// taskReprs writes the tasks of refs as their reprs ("<TaskState 'x'
// memory>"); nil instead of an empty list when orNil.
func (e *dumpEncoder) taskReprs(refs []scheduler.Ref, orNil bool) {
	if orNil && len(refs) == 0 {
		e.null()
		return
	}
	e.arrLen(len(refs))
	for _, r := range refs {
		e.taskRepr(r)
	}
}

// taskRepr writes TaskState.__repr__, built in a reused buffer: 100k
// tasks name each other several times each.
func (e *dumpEncoder) taskRepr(r scheduler.Ref) {
	b := append(e.scratch[:0], "<TaskState "...)
	b = r.Key.AppendRepr(b)
	b = append(append(append(b, ' '), scheduler.StatusName(r.State)...), '>')
	e.b = protocol.AppendStrBytes(e.b, b)
	e.scratch = b
}

// dictKey of a task: its key when a str (whose msgpack is the key's own
// bytes), str() of its list form otherwise.
func (e *dumpEncoder) taskKey(k protocol.Key) {
	if _, ok := k.StrText(); ok {
		e.key(k)
		return
	}
	e.str(k.ListString())
}

func (e *dumpEncoder) workerReprs(addrs []string, orNil bool) {
	if orNil && len(addrs) == 0 {
		e.null()
		return
	}
	e.arrLen(len(addrs))
	for _, a := range addrs {
		e.str(e.workerReprOf(a))
	}
}

func (e *dumpEncoder) workerReprOf(addr string) string {
	if r, ok := e.workerRepr[addr]; ok {
		return r
	}
	return "<WorkerState " + pyStrRepr(addr) + " (removed)>"
}

// kept is names without the excluded ones: each record's map length.
func (e *dumpEncoder) kept(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !e.exclude[n] {
			out = append(out, n)
		}
	}
	return out
}

// memory writes MemoryState._to_dict.
func (e *dumpEncoder) memory(m scheduler.MemoryState) {
	names := e.kept(scheduler.MemoryMeasures)
	e.mapLen(len(names))
	for _, n := range names {
		v, _ := m.Measure(n)
		e.str(n)
		e.int(v)
	}
}
