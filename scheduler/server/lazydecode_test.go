package server

import (
	"reflect"
	"testing"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// taskFinishedOp is a stock worker's task-finished (TaskFinishedMsg.to_dict)
// with the given changes (a nil value deletes the field).
func taskFinishedOp(changes ...any) *protocol.Map {
	m := protocol.NewMap("op", "task-finished", "key", []any{"inc-5b2c", int64(7)}, "run_id", int64(300),
		"nbytes", int64(28), "type", []byte("\x80\x05builtins.int"), "typename", "int",
		"metadata", protocol.NewMap(), "thread", int64(140245337904832),
		"startstops", []any{protocol.NewMap("action", "compute", "start", 1.7e9, "stop", 1.7e9+0.001)},
		"status", "OK", "stimulus_id", "task-finished-1700000000.0")
	for i := 0; i+1 < len(changes); i += 2 {
		if changes[i+1] == nil {
			m.Delete(changes[i].(string))
		} else {
			m.Set(changes[i].(string), changes[i+1])
		}
	}
	return m
}

// generic is what the generic path makes of an op: Decode, then
// workerStimulus.
func generic(t *testing.T, frame0 []byte, now time.Time) (scheduler.Stimulus, bool) {
	t.Helper()
	v, err := protocol.Decode([][]byte{frame0})
	if err != nil {
		t.Fatal(err)
	}
	st, ok, err := workerStimulus("tcp://w:1", v.(*protocol.Map), now)
	return st, ok && err == nil
}

func frame0(t *testing.T, m *protocol.Map) []byte {
	t.Helper()
	frames, err := protocol.Encode(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	return frames[0]
}

// The fast path makes exactly the stimulus the generic path makes, for a
// stock worker's op and its variants.
func TestTaskFinishedFastMatchesGeneric(t *testing.T) {
	now := time.Unix(1700000000, 5)
	cases := map[string]*protocol.Map{
		"stock":               taskFinishedOp(),
		"string key":          taskFinishedOp("key", "x-1"),
		"no stimulus_id":      taskFinishedOp("stimulus_id", nil),
		"no startstops":       taskFinishedOp("startstops", nil),
		"source and int":      taskFinishedOp("startstops", []any{protocol.NewMap("action", "transfer", "start", int64(5), "stop", 6.5, "source", "tcp://a:1")}),
		"thread a dict":       taskFinishedOp("thread", protocol.NewMap()),
		"no type":             taskFinishedOp("type", nil),
		"small numbers":       taskFinishedOp("run_id", int64(-3), "nbytes", int64(0)),
		"op not first":        protocol.NewMap("key", "y", "op", "task-finished", "run_id", int64(1)),
		"unknown extra field": taskFinishedOp("extra", []any{protocol.NewMap("deep", []any{})}),
		"metadata":            taskFinishedOp("metadata", protocol.NewMap("k", []any{int64(1)})),
		"metadata none":       taskFinishedOp("metadata", nil),
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			b := frame0(t, m)
			want, wok := generic(t, b, now)
			got, ok := taskFinishedFast("tcp://w:1", b, now, nil)
			if !ok || !wok {
				t.Fatalf("fast ok=%v, generic ok=%v; want both", ok, wok)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("fast  %+v\ngeneric %+v", got, want)
			}
			// with a stream's reuse, the first op and a repeat alike
			reuse := &streamReuse{}
			for i := range 2 {
				if got, _ := taskFinishedFast("tcp://w:1", b, now, reuse); !reflect.DeepEqual(got, want) {
					t.Fatalf("op %d with reuse: %+v\ngeneric %+v", i, got, want)
				}
			}
		})
	}
}

// Anything else goes to the generic path, which keeps its own rules for
// it: other ops, and fields of a type the fast path does not read.
func TestTaskFinishedFastDeclines(t *testing.T) {
	now := time.Unix(1700000000, 5)
	for name, m := range map[string]*protocol.Map{
		"another op":           protocol.NewMap("op", "add-keys", "keys", []any{"a"}),
		"no op":                protocol.NewMap("key", "a"),
		"run_id a string":      taskFinishedOp("run_id", "3"),
		"startstops item list": taskFinishedOp("startstops", []any{[]any{"compute"}}),
		"typename as bytes":    taskFinishedOp("typename", []byte("int")),
		"key a dict":           taskFinishedOp("key", protocol.NewMap("a", int64(1))),
	} {
		if _, ok := taskFinishedFast("tcp://w:1", frame0(t, m), now, nil); ok {
			t.Errorf("%s: taken by the fast path", name)
		}
	}
	// Truncated anywhere: declined, never a panic.
	b := frame0(t, taskFinishedOp())
	for cut := range len(b) {
		if _, ok := taskFinishedFast("tcp://w:1", b[:cut], now, nil); ok {
			t.Fatalf("a task-finished cut at %d of %d bytes was taken", cut, len(b))
		}
	}
}

// heartbeatMsg is a stock worker's heartbeat_worker request (Worker.heartbeat
// with get_metrics' shape) with the given changes (nil deletes a field).
func heartbeatMsg(changes ...any) []byte {
	metrics := protocol.NewMap("task_counts", protocol.NewMap("executing", int64(1)),
		"bandwidth", protocol.NewMap("total", 2.5e8, "workers", protocol.NewMap(), "types", protocol.NewMap()),
		"digests_total_since_heartbeat", protocol.NewMap("tick-duration", 0.5),
		"managed_bytes", int64(100), "spilled_bytes", protocol.NewMap("memory", int64(0), "disk", int64(0)),
		"event_loop_interval", 0.02, "cpu", 4.0, "memory", int64(120_000_000), "time", 1.7e9)
	m := protocol.NewMap("op", "heartbeat_worker", "address", "tcp://127.0.0.1:4000", "now", 1.7e9,
		"metrics", metrics, "executing", &protocol.Map{Entries: []protocol.Entry{{Key: []any{"inc-5b2c", int64(7)}, Value: 0.25}}},
		"extensions", protocol.NewMap("spans", protocol.NewMap()), "reply", true)
	for i := 0; i+1 < len(changes); i += 2 {
		if changes[i+1] == nil {
			m.Delete(changes[i].(string))
		} else {
			m.Set(changes[i].(string), changes[i+1])
		}
	}
	frames, err := protocol.Encode(m, nil)
	if err != nil {
		panic(err)
	}
	return frames[0]
}

func TestHeartbeatFastReadsWhatTheEngineUses(t *testing.T) {
	raw := heartbeatMsg()
	hb, ok := heartbeatFast(raw)
	if !ok {
		t.Fatal("a stock worker's heartbeat was not read lazily")
	}
	key, _ := protocol.KeyOf([]any{"inc-5b2c", int64(7)})
	if hb.Worker != "tcp://127.0.0.1:4000" || hb.Bandwidth != 2.5e8 || !hb.HasBandwidth ||
		!reflect.DeepEqual(hb.Executing, map[protocol.Key]float64{key: 0.25}) {
		t.Fatalf("read %+v", hb)
	}
	whole, _ := protocol.Decode([][]byte{raw})
	metrics, err := protocol.Decode([][]byte{hb.Metrics.(protocol.Raw)})
	if err != nil || protocol.String(metrics) != protocol.String(whole.(*protocol.Map).Get("metrics")) {
		t.Fatalf("metrics kept as %s (%v)", protocol.String(metrics), err)
	}

	// no bandwidth, no executing, metrics nil: as the generic reader
	hb, ok = heartbeatFast(heartbeatMsg("metrics", protocol.NewMap("cpu", 1.0), "executing", nil))
	if !ok || hb.HasBandwidth || hb.Executing == nil || len(hb.Executing) != 0 || hb.Metrics == nil {
		t.Fatalf("without bandwidth and executing: %+v, %v", hb, ok)
	}

	// what the lazy reader leaves to the generic one, which names the field
	for name, raw := range map[string][]byte{
		"no address":         heartbeatMsg("address", nil),
		"address not a str":  heartbeatMsg("address", int64(3)),
		"metrics not a dict": heartbeatMsg("metrics", "high"),
		"total not a number": heartbeatMsg("metrics", protocol.NewMap("bandwidth", protocol.NewMap("total", "fast"))),
		"bandwidth not dict": heartbeatMsg("metrics", protocol.NewMap("bandwidth", int64(5))),
		"executing not dict": heartbeatMsg("executing", []any{int64(1)}),
		"truncated":          heartbeatMsg()[:40],
	} {
		if hb, ok := heartbeatFast(raw); ok {
			t.Errorf("%s: read lazily as %+v", name, hb)
		}
	}
}
