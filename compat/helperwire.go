package compat

import (
	_ "embed"
	"fmt"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// The helper wire: every request Go sends the materializer helper and every
// answer it reads back, typed, in one place. Its Python twin is
// helper_wire.py, which documents the layout; change both together and
// bump wireVersion.

// helperWireScript is helper_wire.py. The materializer helper runs it for
// the whole wire; the scheduler-side host (hostModules) only for its
// framing, read_message and write_message.
//
//go:embed helper_wire.py
var helperWireScript string

// wireVersion must equal helper_wire.WIRE_VERSION; the startup handshake
// checks it.
const wireVersion = 4

// Task record fields (helper_wire.TASK_*).
const (
	taskKey = iota
	taskDeps
	taskKind
	taskDataProducer
	taskAnnotations
	taskSpec
	taskOrder
	taskMemoBase
	taskFields
)

// Orderings a materialize request can ask for.
const (
	OrderingGo     = "go"     // the helper sends no priorities; Go runs its dask.order port
	OrderingPython = "python" // the helper runs dask.order.order (and culls) itself
)

// ---- requests ------------------------------------------------------------------

func encodeVersionsRequest(id int64) ([][]byte, error) {
	return protocol.Encode(protocol.NewMap("op", "versions", "id", id), nil)
}

func encodeMaterializeRequest(id int64, msg any, ordering string, checkOrder bool) ([][]byte, error) {
	return protocol.Encode(protocol.NewMap("op", "materialize", "id", id, "msg", helperFields(msg),
		"ordering", ordering, "check_order", checkOrder), nil)
}

// materializeReads are the update-graph fields materializer.py's
// materialize reads. The rest stay in Go: the helper decodes every
// pickled field it is sent, and code (the client's source, which can be a
// whole notebook cell) and span_metadata were unpickled for nothing on
// every graph, most of a small graph's request decoding.
var materializeReads = [...]string{"op", "expr_ser", "keys", "annotations", "internal_priority"}

// helperFields is msg with only materializeReads; msg as it is when it is
// not a map (the helper then answers with its error).
func helperFields(msg any) any {
	m, ok := msg.(*protocol.Map)
	if !ok {
		return msg
	}
	out := &protocol.Map{Entries: make([]protocol.Entry, 0, len(materializeReads))}
	for _, name := range materializeReads {
		if v, ok := m.Lookup(name); ok {
			out.Entries = append(out.Entries, protocol.Entry{Key: name, Value: v})
		}
	}
	return out
}

func encodeShuffleRunRequest(id int64, r *scheduler.ShuffleRunRequest) ([][]byte, error) {
	existing := r.Existing
	if existing == nil {
		existing = []any{}
	}
	return protocol.Encode(protocol.NewMap("op", "shuffle_run", "id", id,
		"shuffle_id", r.ShuffleID, "run_id", r.RunID, "barrier", r.Barrier,
		"workers", r.Workers, "existing", existing, "span_id", nil), nil)
}

// ---- answers -------------------------------------------------------------------

// answerHead is what every answer carries.
type answerHead struct {
	id     int64
	status string // "OK" or "error"
	done   bool
}

func parseHead(v any) (*protocol.Map, answerHead, error) {
	resp, ok := v.(*protocol.Map)
	if !ok {
		return nil, answerHead{}, fmt.Errorf("answer is %s, not a dict", truncate(protocol.String(v)))
	}
	var h answerHead
	if h.id, ok = resp.Get("id").(int64); !ok {
		return resp, h, fmt.Errorf("answer id is %s", truncate(protocol.String(resp.Get("id"))))
	}
	h.status, _ = resp.Get("status").(string)
	h.done, _ = resp.Get("done").(bool)
	return resp, h, nil
}

// versionsAnswer is the answer to the startup request.
type versionsAnswer struct {
	versions, plugins *protocol.Map
}

func parseVersionsAnswer(resp *protocol.Map) (versionsAnswer, error) {
	var a versionsAnswer
	var ok bool
	if a.versions, ok = resp.Get("versions").(*protocol.Map); !ok {
		return a, fmt.Errorf("versions answer lacks a versions dict: %s", truncate(protocol.String(resp)))
	}
	if w, _ := resp.Get("wire").(int64); w != wireVersion {
		return a, fmt.Errorf("helper speaks wire version %s, this scheduler %d", protocol.String(resp.Get("wire")), wireVersion)
	}
	var err error
	a.plugins, err = workerPlugins(resp.Get("worker_plugins"))
	return a, err
}

// graphChunk is one answer to a materialize request.
type graphChunk struct {
	objects  [][]byte   // appended to the graph's object table, in order
	tasks    []wireTask // in the materialized graph's order
	expected int64      // an upper bound of the graph's tasks (0: unknown)
	final    *graphFinal
}

// wireTask is a task record as it arrived; graphBuilder checks its spec
// against the object table and converts it.
type wireTask struct {
	key          protocol.Key
	deps         []protocol.Key
	kind         string
	dataProducer bool
	annotations  *protocol.Map
	spec         []byte
	order        int64
	hasOrder     bool
	memoBase     int64 // the spec's own memo entries start here (pickle.Prepare)
}

// graphFinal is what the last chunk adds.
type graphFinal struct {
	culled          bool    // the helper culled (ordering=python)
	explicitCulling bool    // an LLGExpr: Go culls to what the keys reach, unless culled
	ordered         bool    // every task carries its priority
	checkOrder      []int64 // dask.order's priorities for the check, or nil
}

func parseGraphChunk(resp *protocol.Map, done bool) (graphChunk, error) {
	var c graphChunk
	c.expected, _ = resp.Get("expected").(int64)
	objs, ok := resp.Get("objects").([]any)
	if !ok && resp.Get("objects") != nil {
		return c, fmt.Errorf("objects is %s, not a list", truncate(protocol.String(resp.Get("objects"))))
	}
	c.objects = make([][]byte, len(objs))
	for i, o := range objs {
		if c.objects[i], ok = o.([]byte); !ok {
			return c, fmt.Errorf("object %d is %s, not pickle bytes", i, truncate(protocol.String(o)))
		}
	}
	var err error
	if c.tasks, err = parseWireTasks(resp.Get("tasks")); err != nil {
		return c, err
	}
	if done {
		f := &graphFinal{}
		f.culled, _ = resp.Get("culled").(bool)
		f.explicitCulling, _ = resp.Get("explicit_culling").(bool)
		f.ordered, _ = resp.Get("ordered").(bool)
		if co, ok := resp.Get("check_order").([]any); ok {
			f.checkOrder = make([]int64, len(co))
			for i, o := range co {
				if f.checkOrder[i], ok = o.(int64); !ok {
					return c, fmt.Errorf("check_order[%d] is %s, not an int", i, protocol.String(o))
				}
			}
		}
		c.final = f
	}
	return c, nil
}

// parseWireTasks reads a chunk's task records: from their msgpack (a Raw
// kept by protocol.DecodeKeepingRaw, the helper's answers as readLoop reads
// them) field by field, or from the decoded list. A record the fast reader
// cannot take is decoded and read generically, which names what is wrong.
func parseWireTasks(v any) ([]wireTask, error) {
	if raw, ok := v.(protocol.Raw); ok {
		if tasks, ok := readWireTasks(raw); ok {
			return tasks, nil
		}
		var err error
		if v, err = protocol.Decode([][]byte{raw}); err != nil {
			return nil, fmt.Errorf("tasks: %w", err)
		}
	}
	items, ok := v.([]any)
	if !ok && v != nil {
		return nil, fmt.Errorf("tasks is %s, not a list", truncate(protocol.String(v)))
	}
	tasks := make([]wireTask, len(items))
	for i, it := range items {
		if err := parseWireTask(&tasks[i], it); err != nil {
			return nil, fmt.Errorf("task %d of a chunk: %w", i, err)
		}
	}
	return tasks, nil
}

// readWireTasks reads task records from msgpack in place: per task a key
// (one copy), its dependencies' keys, a spec's bytes, no value tree.
// false: anything unexpected, for parseWireTask to name.
func readWireTasks(raw []byte) ([]wireTask, bool) {
	r := protocol.ReadValues(raw)
	n, err := r.Array()
	if err != nil {
		return nil, false
	}
	tasks := make([]wireTask, n)
	for i := range tasks {
		if !readWireTask(&r, &tasks[i]) {
			return nil, false
		}
	}
	return tasks, true
}

func readWireTask(r *protocol.Fields, t *wireTask) bool {
	if n, err := r.Array(); err != nil || n != taskFields {
		return false
	}
	var err error
	if t.key, err = r.Key(); err != nil {
		return false
	}
	if t.deps, err = r.Keys(); err != nil { // None reads as none, as KeysOf reads it
		return false
	}
	if r.IsNil() {
		return false // kind
	}
	if t.kind, err = r.Str(); err != nil || r.IsNil() {
		return false // a nil data_producer is not a bool
	}
	if t.dataProducer, err = r.Bool(); err != nil {
		return false
	}
	if !r.IsNil() {
		a, err := r.Value()
		if t.annotations, _ = a.(*protocol.Map); err != nil || t.annotations == nil {
			return false
		}
	}
	if r.IsNil() {
		return false // spec
	}
	if t.spec, err = r.Bin(); err != nil {
		return false
	}
	if !r.IsNil() {
		if t.order, err = r.Int(); err != nil {
			return false
		}
		t.hasOrder = true
	}
	if r.IsNil() {
		return false // memo_base
	}
	if t.memoBase, err = r.Int(); err != nil {
		return false
	}
	return true
}

func parseWireTask(t *wireTask, v any) error {
	rec, ok := v.([]any)
	if !ok || len(rec) != taskFields {
		return fmt.Errorf("record is %s, not a list of %d fields", truncate(protocol.String(v)), taskFields)
	}
	key, err := protocol.KeyOf(rec[taskKey])
	if err != nil {
		return fmt.Errorf("key: %w", err)
	}
	t.key = key
	if t.deps, err = protocol.KeysOf(rec[taskDeps]); err != nil {
		return fmt.Errorf("deps of %s: %w", key, err)
	}
	if t.kind, ok = rec[taskKind].(string); !ok {
		return fmt.Errorf("kind of %s is %s, not a str", key, truncate(protocol.String(rec[taskKind])))
	}
	if t.dataProducer, ok = rec[taskDataProducer].(bool); !ok {
		return fmt.Errorf("data_producer of %s is not a bool", key)
	}
	switch a := rec[taskAnnotations].(type) {
	case *protocol.Map:
		t.annotations = a
	case nil:
	default:
		return fmt.Errorf("annotations of %s are %s, not a dict", key, truncate(protocol.String(a)))
	}
	if t.spec, ok = rec[taskSpec].([]byte); !ok {
		return fmt.Errorf("spec of %s is %s, not pickle bytes", key, truncate(protocol.String(rec[taskSpec])))
	}
	switch o := rec[taskOrder].(type) {
	case int64:
		t.order, t.hasOrder = o, true
	case nil:
		// not ordered by the helper, or a client-supplied internal_priority
		// that misses the key (distributed then leaves it without priority;
		// 0 is the closest)
	default:
		return fmt.Errorf("order of %s is %s, not an int", key, protocol.String(o))
	}
	if t.memoBase, ok = rec[taskMemoBase].(int64); !ok {
		return fmt.Errorf("memo_base of %s is %s, not an int", key, truncate(protocol.String(rec[taskMemoBase])))
	}
	return nil
}

// parseShuffleRun fills st from a shuffle_run answer.
func parseShuffleRun(st *scheduler.ShuffleRunCreated, resp *protocol.Map) error {
	rs, ok := resp.Get("run_spec").(*protocol.Blob)
	if !ok || !rs.Pickled {
		return fmt.Errorf("run_spec is %s, not a __Pickled__ blob", truncate(protocol.String(resp.Get("run_spec"))))
	}
	pairs, ok := resp.Get("worker_for").([]any)
	if !ok {
		return fmt.Errorf("worker_for is %s, not a list", truncate(protocol.String(resp.Get("worker_for"))))
	}
	for i, p := range pairs {
		pair, ok := p.([]any)
		if !ok || len(pair) != 2 {
			return fmt.Errorf("worker_for[%d] is %s, not a [partition, worker] pair", i, truncate(protocol.String(p)))
		}
		if _, ok := pair[1].(string); !ok {
			return fmt.Errorf("worker_for[%d] names worker %s", i, truncate(protocol.String(pair[1])))
		}
	}
	raw, ok := resp.Get("workers").([]any)
	if !ok || len(raw) == 0 {
		return fmt.Errorf("workers is %s, not a non-empty list", truncate(protocol.String(resp.Get("workers"))))
	}
	workers := make([]string, len(raw))
	for i, w := range raw {
		if workers[i], ok = w.(string); !ok {
			return fmt.Errorf("workers[%d] is %s, not a str", i, truncate(protocol.String(w)))
		}
	}
	st.RunSpec, st.WorkerFor, st.Workers = rs, pairs, workers
	return nil
}

// errorInfo takes distributed.core.error_message's fields as they are: the
// exception and traceback stay opaque Serialized blobs for task-erred.
func errorInfo(resp *protocol.Map) *scheduler.ErrorInfo {
	info := &scheduler.ErrorInfo{
		Exception: resp.Get("exception"),
		Traceback: resp.Get("traceback"),
	}
	info.ExceptionText, _ = resp.Get("exception_text").(string)
	info.TracebackText, _ = resp.Get("traceback_text").(string)
	return info
}
