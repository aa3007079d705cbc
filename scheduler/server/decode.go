package server

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"daskgo/compat"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// This file turns stream ops, as decoded from the wire, into engine stimuli.
// Peers are trusted for nothing: a field of the wrong type is an error that
// names the op and the field, never a panic. Unknown extra fields are
// ignored (we are lenient when receiving, exact when sending).

// fieldError names the op and field a peer got wrong.
type fieldError struct {
	op, field, want string
	got             any
}

func (e *fieldError) Error() string {
	return fmt.Sprintf("op %q: field %q must be %s, got %s", e.op, e.field, e.want, protocol.String(e.got))
}

// fields reads typed fields of one op dict, remembering the first error.
type fields struct {
	op  string
	m   *protocol.Map
	err error
}

func (f *fields) fail(field, want string, got any) {
	if f.err == nil {
		f.err = &fieldError{op: f.op, field: field, want: want, got: got}
	}
}

func (f *fields) str(name string) string {
	v := f.m.Get(name)
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case []byte:
		return string(x)
	default:
		f.fail(name, "a string", v)
		return ""
	}
}

func (f *fields) int(name string) int64 {
	switch x := f.m.Get(name).(type) {
	case int64:
		return x
	case nil:
		return 0
	case uint64:
		return math.MaxInt64
	case float64:
		return int64(x)
	default:
		f.fail(name, "an int", x)
		return 0
	}
}

func (f *fields) float(name string) float64 {
	switch x := f.m.Get(name).(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case nil:
		return 0
	default:
		f.fail(name, "a number", x)
		return 0
	}
}

func (f *fields) bool(name string) bool {
	switch x := f.m.Get(name).(type) {
	case bool:
		return x
	case nil:
		return false
	default:
		f.fail(name, "a bool", x)
		return false
	}
}

func (f *fields) key(name string) protocol.Key {
	k, err := protocol.KeyOf(f.m.Get(name))
	if err != nil {
		f.fail(name, "a dask key", f.m.Get(name))
	}
	return k
}

func (f *fields) keys(name string) []protocol.Key {
	ks, err := protocol.KeysOf(f.m.Get(name))
	if err != nil {
		f.fail(name, "a list of dask keys", f.m.Get(name))
	}
	return ks
}

func (f *fields) mapOf(name string) *protocol.Map {
	switch x := f.m.Get(name).(type) {
	case *protocol.Map:
		return x
	case nil:
		return nil
	default:
		f.fail(name, "a dict", x)
		return nil
	}
}

func (f *fields) strings(name string) []string {
	v := f.m.Get(name)
	var items []any
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		items = x
	case protocol.Set:
		items = x
	case string:
		return []string{x}
	default:
		f.fail(name, "a list of strings", v)
		return nil
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, ok := it.(string)
		if !ok {
			f.fail(name, "a list of strings", v)
			return nil
		}
		out = append(out, s)
	}
	return out
}

func (f *fields) base(now time.Time) scheduler.Base {
	return stimulusBase(f.str("stimulus_id"), f.op, now)
}

// stimulusBase is a stimulus's Base: the peer's stimulus_id when it sent
// one, else prefix and the time, as distributed names its own stimuli
// (f"{prefix}-{time()}").
func stimulusBase(id, prefix string, now time.Time) scheduler.Base {
	if id == "" {
		// one allocation (Sprintf took two): a client releasing futures
		// sends no stimulus_id, once per future
		var buf [64]byte
		b := strconv.AppendInt(append(append(buf[:0], prefix...), '-'), now.UnixNano(), 10)
		id = string(b)
	}
	return scheduler.Base{ID: id, At: now}
}

// workerStimulus converts one op of a worker's stream. ok is false for ops
// that carry nothing for the engine (keep-alive, log-event).
func workerStimulus(worker string, m *protocol.Map, now time.Time) (scheduler.Stimulus, bool, error) {
	op, _ := m.Get("op").(string)
	f := &fields{op: op, m: m}
	b := f.base(now)
	var st scheduler.Stimulus
	switch op {
	case "task-finished":
		st = &scheduler.TaskFinished{Base: b, Worker: worker, Key: f.key("key"), RunID: f.int("run_id"),
			NBytes: f.int("nbytes"), Type: bytesField(m.Get("type")), TypeName: f.str("typename"),
			StartStops: startStops(m.Get("startstops")), Thread: m.Get("thread"), Metadata: taskMetadata(m.Get("metadata"))}
	case "task-erred":
		st = &scheduler.TaskErred{Base: b, Worker: worker, Key: f.key("key"), RunID: f.int("run_id"),
			Exception: m.Get("exception"), Traceback: m.Get("traceback"),
			ExceptionText: f.str("exception_text"), TracebackText: f.str("traceback_text"),
			StartStops: startStops(m.Get("startstops")), Thread: m.Get("thread")}
	case "release-worker-data":
		st = &scheduler.ReleaseWorkerData{Base: b, Worker: worker, Key: f.key("key")}
	case "add-keys":
		st = &scheduler.AddKeys{Base: b, Worker: worker, Keys: f.keys("keys")}
	case "long-running":
		st = &scheduler.LongRunning{Base: b, Worker: worker, Key: f.key("key"), RunID: f.int("run_id"),
			ComputeDuration: f.float("compute_duration")}
	case "reschedule":
		st = &scheduler.Reschedule{Base: b, Worker: worker, Key: f.key("key")}
	case "worker-status-change":
		st = &scheduler.WorkerStatusChange{Base: b, Worker: worker, Status: f.str("status")}
	case "request-refresh-who-has":
		st = &scheduler.RequestRefreshWhoHas{Base: b, Worker: worker, Keys: f.keys("keys")}
	case "log-event":
		topics, err := topicsOf(m.Get("topic"))
		if err != nil {
			return nil, false, err
		}
		st = &scheduler.LogEvent{Base: b, Topics: topics, Msg: m.Get("msg"), Worker: worker}
	case "steal-response":
		// the answer to a steal-request (stealing.py: move_task_confirm);
		// state is None when the worker does not know the task
		st = &scheduler.StealResponse{Base: b, Worker: worker, Key: f.key("key"), State: f.str("state")}
	case "keep-alive":
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("unknown op %q on the stream of worker %s", op, worker)
	}
	if f.err != nil {
		return nil, false, f.err
	}
	return st, true, nil
}

func bytesField(v any) []byte {
	b, _ := v.([]byte)
	return b
}

func startStops(v any) []scheduler.StartStop {
	items, _ := v.([]any)
	out := make([]scheduler.StartStop, 0, len(items))
	for _, it := range items {
		m, ok := it.(*protocol.Map)
		if !ok {
			continue
		}
		f := &fields{op: "startstops", m: m}
		ss := scheduler.StartStop{Action: f.str("action"), Start: f.float("start"), Stop: f.float("stop"), Source: f.str("source")}
		if f.err == nil {
			out = append(out, ss)
		}
	}
	return out
}

// clientStimulus converts one op of a client's stream. ok is false for ops
// that need no engine work (subscribe-topic, ...).
func clientStimulus(client string, m *protocol.Map, now time.Time) (scheduler.Stimulus, bool, error) {
	op, _ := m.Get("op").(string)
	f := &fields{op: op, m: m}
	b := f.base(now)
	var st scheduler.Stimulus
	switch op {
	case "update-graph":
		st = updateGraphStimulus(f, b, client)
	case "client-desires-keys":
		who := f.str("client")
		if who == "" {
			who = client
		}
		st = &scheduler.ClientDesiresKeys{Base: b, Client: who, Stream: client, Keys: f.keys("keys")}
	case "client-releases-keys":
		who := f.str("client")
		if who == "" {
			who = client
		}
		st = &scheduler.ClientReleasesKeys{Base: b, Client: who, Stream: client, Keys: f.keys("keys")}
	case "cancel-keys":
		st = &scheduler.CancelKeys{Base: b, Client: client, Keys: f.keys("keys"), Force: f.bool("force"),
			Reason: m.Get("reason"), Msg: m.Get("msg")}
	case "heartbeat-client":
		st = &scheduler.HeartbeatClient{Base: b, Client: client}
	case "close-client":
		st = &scheduler.RemoveClient{Base: b, Client: client}
	case "update-data":
		who, nbytes, err := whoHasAndNBytes(m)
		if err != nil {
			return nil, false, fmt.Errorf("op %q: %w", op, err)
		}
		st = &scheduler.UpdateData{Base: b, Client: client, WhoHas: who, NBytes: nbytes}
	case "report-key":
		st = &scheduler.ClientDesiresKeys{Base: b, Client: client, Keys: []protocol.Key{f.key("key")}}
	case "subscribe-topic":
		st = &scheduler.SubscribeTopic{Base: b, Topic: f.str("topic"), Client: client}
	case "unsubscribe-topic":
		st = &scheduler.UnsubscribeTopic{Base: b, Topic: f.str("topic"), Client: client}
	default:
		var known bool
		if st, known = coordinationStreamStimulus(client, f, b); !known {
			return nil, false, fmt.Errorf("op %q is not supported by dask-go-scheduler on a client stream", op)
		}
	}
	if f.err != nil {
		return nil, false, f.err
	}
	return st, true, nil
}

// whoHasAndNBytes reads update_data's who_has {key: [addr]} and nbytes {key: int}.
func whoHasAndNBytes(m *protocol.Map) (map[protocol.Key][]string, map[protocol.Key]int64, error) {
	who := map[protocol.Key][]string{}
	wm, _ := m.Get("who_has").(*protocol.Map)
	for _, e := range wm.Items() {
		k, err := protocol.KeyOf(e.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("who_has: %w", err)
		}
		f := &fields{op: "update-data", m: protocol.NewMap("w", e.Value)}
		who[k] = f.strings("w")
		if f.err != nil {
			return nil, nil, f.err
		}
	}
	nbytes := map[protocol.Key]int64{}
	nm, _ := m.Get("nbytes").(*protocol.Map)
	for _, e := range nm.Items() {
		k, err := protocol.KeyOf(e.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("nbytes: %w", err)
		}
		n, _ := e.Value.(int64)
		nbytes[k] = n
	}
	return who, nbytes, nil
}

// updateGraphStimulus decodes what the engine uses of update-graph; the
// dict itself goes on to a materializer helper as the payload. Only bad
// keys refuse the op: the fields that shape priorities fall back to their
// defaults, as the Python scheduler's would not fail the graph either
// (an unknown submitting_task is a super-task already forgotten).
func updateGraphStimulus(f *fields, b scheduler.Base, client string) *scheduler.UpdateGraph {
	ug := &scheduler.UpdateGraph{Base: b, Client: client, Keys: f.keys("keys"), Payload: f.m}
	if d, err := compat.ParseTimedelta(f.m.Get("fifo_timeout")); err == nil {
		ug.FifoTimeout = d
	}
	if v := f.m.Get("submitting_task"); v != nil {
		k, err := protocol.KeyOf(v)
		if err != nil {
			k = protocol.StrKey(protocol.String(v)) // names no task: the "already cleaned up" case
		}
		ug.SubmittingTask = &k
	}
	ug.UserPriority, _ = toFloat(f.m.Get("user_priority"))
	switch v := f.m.Get("actors").(type) {
	case bool:
		ug.AllActors = v
	case []any, protocol.Set:
		ug.ActorKeys, _ = protocol.KeysOf(v)
	}
	return ug
}

// lookupPath reads a nested dict value (nil when a level is missing).
func lookupPath(m *protocol.Map, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(*protocol.Map)
		if !ok {
			return nil
		}
		v = mm.Get(p)
	}
	return v
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}
