package server

import (
	"strings"
	"testing"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler"
)

var now = time.Unix(1_700_000_000, 0)

func tupleKey(t *testing.T, parts ...any) protocol.Key {
	t.Helper()
	k, err := protocol.KeyOf(parts)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestWorkerStimulusTaskFinished(t *testing.T) {
	m := protocol.NewMap("op", "task-finished", "key", []any{"sum-abc", int64(0), int64(1)}, "run_id", int64(7),
		"nbytes", int64(28), "type", []byte("cls"), "typename", "int", "metadata", &protocol.Map{}, "thread", int64(1),
		"startstops", []any{protocol.NewMap("action", "compute", "start", 1.0, "stop", 1.5)},
		"stimulus_id", "task-finished-1", "status", "OK")
	st, ok, err := workerStimulus("tcp://w:1", m, now)
	if err != nil || !ok {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	tf := st.(*scheduler.TaskFinished)
	if tf.Key != tupleKey(t, "sum-abc", int64(0), int64(1)) || tf.RunID != 7 || tf.NBytes != 28 ||
		string(tf.Type) != "cls" || tf.Worker != "tcp://w:1" || tf.ID != "task-finished-1" || !tf.At.Equal(now) {
		t.Fatalf("got %+v", tf)
	}
	if len(tf.StartStops) != 1 || tf.StartStops[0].Stop != 1.5 {
		t.Fatalf("startstops %+v", tf.StartStops)
	}
}

func TestWorkerStimulusRejectsBadFields(t *testing.T) {
	cases := []*protocol.Map{
		protocol.NewMap("op", "task-finished", "key", []byte("bytes are not keys"), "run_id", int64(1)),
		protocol.NewMap("op", "task-finished", "key", "k", "run_id", "seven"),
		protocol.NewMap("op", "add-keys", "keys", "not-a-list-of-keys-but-a-str"),
		protocol.NewMap("op", "long-running", "key", "k", "compute_duration", []any{}),
		protocol.NewMap("op", "no-such-op"),
		protocol.NewMap("key", "k"),
	}
	for i, m := range cases {
		if _, ok, err := workerStimulus("tcp://w:1", m, now); err == nil || ok {
			t.Errorf("case %d (%s): ok=%v err=%v, want an error", i, protocol.String(m), ok, err)
		}
	}
}

func TestWorkerStimulusIgnoresChatter(t *testing.T) {
	st, ok, err := workerStimulus("tcp://w:1", protocol.NewMap("op", "keep-alive"), now)
	if st != nil || ok || err != nil {
		t.Errorf("keep-alive: st=%v ok=%v err=%v", st, ok, err)
	}
}

// TestStealResponse: steal-response becomes a StealResponse carrying the
// request's stimulus id; a None state (the worker forgot the task) is "".
func TestStealResponse(t *testing.T) {
	for _, state := range []any{"ready", nil} {
		m := protocol.NewMap("op", "steal-response", "key", "x", "state", state, "stimulus_id", "steal-3")
		st, ok, err := workerStimulus("tcp://w:1", m, now)
		sr, _ := st.(*scheduler.StealResponse)
		if err != nil || !ok || sr == nil {
			t.Fatalf("state %v: st=%v ok=%v err=%v", state, st, ok, err)
		}
		want, _ := state.(string)
		if sr.Worker != "tcp://w:1" || sr.Key != protocol.StrKey("x") || sr.State != want || sr.ID != "steal-3" {
			t.Fatalf("state %v: got %+v", state, sr)
		}
	}
}

// TestWorkerLogEvent: log-event becomes a LogEvent from that worker; a
// missing topic is an error, not an event under no topic.
func TestWorkerLogEvent(t *testing.T) {
	st, ok, err := workerStimulus("tcp://w:1", protocol.NewMap("op", "log-event", "topic", "t", "msg", "m"), now)
	le, _ := st.(*scheduler.LogEvent)
	if err != nil || !ok || le == nil || le.Worker != "tcp://w:1" || le.Topics[0] != "t" {
		t.Fatalf("st=%v ok=%v err=%v", st, ok, err)
	}
	if _, _, err := workerStimulus("tcp://w:1", protocol.NewMap("op", "log-event"), now); err == nil {
		t.Fatal("log-event without a topic must be an error")
	}
}

func TestClientStimuli(t *testing.T) {
	keys := protocol.Set{"a", []any{"b", int64(1)}}
	cases := map[string]func(scheduler.Stimulus) bool{
		"client-desires-keys":  func(s scheduler.Stimulus) bool { return len(s.(*scheduler.ClientDesiresKeys).Keys) == 2 },
		"client-releases-keys": func(s scheduler.Stimulus) bool { return s.(*scheduler.ClientReleasesKeys).Client == "c1" },
		"cancel-keys":          func(s scheduler.Stimulus) bool { return s.(*scheduler.CancelKeys).Force },
		"heartbeat-client":     func(s scheduler.Stimulus) bool { return s.(*scheduler.HeartbeatClient).Client == "c1" },
		"close-client":         func(s scheduler.Stimulus) bool { return s.(*scheduler.RemoveClient).Client == "c1" },
		"update-graph": func(s scheduler.Stimulus) bool {
			ug := s.(*scheduler.UpdateGraph)
			return len(ug.Keys) == 2 && ug.Payload != nil
		},
	}
	for op, check := range cases {
		m := protocol.NewMap("op", op, "keys", keys, "force", true)
		st, ok, err := clientStimulus("c1", m, now)
		if err != nil || !ok || !check(st) {
			t.Errorf("%s: st=%+v ok=%v err=%v", op, st, ok, err)
		}
	}
	if _, _, err := clientStimulus("c1", protocol.NewMap("op", "run-python-here"), now); err == nil ||
		!strings.Contains(err.Error(), "run-python-here") {
		t.Errorf("unknown client op: err=%v, want one naming the op", err)
	}
}

func TestUpdateDataFields(t *testing.T) {
	m := protocol.NewMap("op", "update-data",
		"who_has", &protocol.Map{Entries: []protocol.Entry{{Key: "x", Value: []any{"tcp://w:1"}}}},
		"nbytes", &protocol.Map{Entries: []protocol.Entry{{Key: "x", Value: int64(10)}}})
	st, ok, err := clientStimulus("c1", m, now)
	if err != nil || !ok {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	ud := st.(*scheduler.UpdateData)
	if got := ud.WhoHas[protocol.StrKey("x")]; len(got) != 1 || got[0] != "tcp://w:1" || ud.NBytes[protocol.StrKey("x")] != 10 {
		t.Fatalf("got %+v", ud)
	}
	bad := protocol.NewMap("op", "update-data", "who_has",
		&protocol.Map{Entries: []protocol.Entry{{Key: protocol.NewMap(), Value: []any{}}}})
	if _, _, err := clientStimulus("c1", bad, now); err == nil {
		t.Fatal("a dict as a key must be rejected")
	}
}

func TestAddWorkerStimulus(t *testing.T) {
	m := protocol.NewMap("op", "register-worker", "address", "tcp://127.0.0.1:4000", "status", "init",
		"nthreads", int64(2), "name", int64(3), "memory_limit", int64(1<<30), "resources", protocol.NewMap("GPU", int64(2)),
		"nanny", "tcp://127.0.0.1:4001", "services", protocol.NewMap("dashboard", int64(1)))
	aw, err := addWorkerStimulus(m, now)
	if err != nil {
		t.Fatal(err)
	}
	if aw.Name != "3" || aw.NThreads != 2 || aw.Resources["GPU"] != 2 || aw.Nanny != "tcp://127.0.0.1:4001" {
		t.Fatalf("got %+v", aw)
	}
	if _, err := addWorkerStimulus(protocol.NewMap("op", "register-worker", "nthreads", int64(1)), now); err == nil {
		t.Fatal("register-worker without an address must be refused")
	}
}
