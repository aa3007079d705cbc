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
		"metadata", protocol.NewMap("k", []any{int64(1)}), "thread", int64(140245337904832),
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
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			b := frame0(t, m)
			want, wok := generic(t, b, now)
			got, ok := taskFinishedFast("tcp://w:1", b, now)
			if !ok || !wok {
				t.Fatalf("fast ok=%v, generic ok=%v; want both", ok, wok)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("fast  %+v\ngeneric %+v", got, want)
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
		if _, ok := taskFinishedFast("tcp://w:1", frame0(t, m), now); ok {
			t.Errorf("%s: taken by the fast path", name)
		}
	}
	// Truncated anywhere: declined, never a panic.
	b := frame0(t, taskFinishedOp())
	for cut := range len(b) {
		if _, ok := taskFinishedFast("tcp://w:1", b[:cut], now); ok {
			t.Fatalf("a task-finished cut at %d of %d bytes was taken", cut, len(b))
		}
	}
}
