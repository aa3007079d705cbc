package server

import (
	"reflect"
	"testing"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// The per-task ops of the release path, read fast, make exactly the
// stimulus the generic path makes (Decode, then workerStimulus or
// clientStimulus), and anything else is left to the generic path.
func TestReleaseOpsFastMatchGeneric(t *testing.T) {
	now := time.Unix(1700000000, 5)
	worker := func(b []byte) (scheduler.Stimulus, bool) { return workerOpFast("tcp://w:1", b, now, nil) }
	client := func(b []byte) (scheduler.Stimulus, bool) { return clientOpFast("Client-1", b, now) }
	genericWorker := func(m *protocol.Map) (scheduler.Stimulus, bool, error) {
		return workerStimulus("tcp://w:1", m, now)
	}
	genericClient := func(m *protocol.Map) (scheduler.Stimulus, bool, error) {
		return clientStimulus("Client-1", m, now)
	}
	type side struct {
		fast    func([]byte) (scheduler.Stimulus, bool)
		generic func(*protocol.Map) (scheduler.Stimulus, bool, error)
	}
	w, c := side{worker, genericWorker}, side{client, genericClient}
	taken := map[string]struct {
		side
		m *protocol.Map
	}{
		// Worker._handle_remove_replicas / release_key's message
		"release-worker-data": {w, protocol.NewMap("op", "release-worker-data", "key", "inc-1", "stimulus_id", "free-keys-1.5")},
		"tuple key":           {w, protocol.NewMap("op", "release-worker-data", "key", []any{"x", int64(2)}, "stimulus_id", "s")},
		"no stimulus_id":      {w, protocol.NewMap("op", "release-worker-data", "key", "k")},
		"task-finished":       {w, taskFinishedOp()},
		// Client._release_key's message
		"client-releases-keys": {c, protocol.NewMap("op", "client-releases-keys", "keys", []any{"inc-1"}, "client", "Client-1")},
		"another client":       {c, protocol.NewMap("op", "client-releases-keys", "keys", []any{"a", "b"}, "client", "Client-2", "stimulus_id", "x")},
		"no client":            {c, protocol.NewMap("keys", []any{[]any{"t", 1.5}}, "op", "client-releases-keys")},
		"no keys":              {c, protocol.NewMap("op", "client-releases-keys", "client", "Client-1")},
	}
	for name, tc := range taken {
		t.Run(name, func(t *testing.T) {
			b := frame0(t, tc.m)
			v, err := protocol.Decode([][]byte{b})
			if err != nil {
				t.Fatal(err)
			}
			want, wok, werr := tc.generic(v.(*protocol.Map))
			got, ok := tc.fast(b)
			if !ok || !wok || werr != nil {
				t.Fatalf("fast ok=%v; generic ok=%v err=%v", ok, wok, werr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("fast    %+v\ngeneric %+v", got, want)
			}
		})
	}
	declined := map[string]struct {
		fast func([]byte) (scheduler.Stimulus, bool)
		m    *protocol.Map
	}{
		"add-keys":                 {worker, protocol.NewMap("op", "add-keys", "keys", []any{"a"})},
		"release without a key":    {worker, protocol.NewMap("op", "release-worker-data")},
		"release with a dict key":  {worker, protocol.NewMap("op", "release-worker-data", "key", protocol.NewMap())},
		"client-desires-keys":      {client, protocol.NewMap("op", "client-desires-keys", "keys", []any{"a"})},
		"keys a set":               {client, protocol.NewMap("op", "client-releases-keys", "keys", protocol.Set{"a"})},
		"client id as bytes":       {client, protocol.NewMap("op", "client-releases-keys", "keys", []any{"a"}, "client", []byte("C"))},
		"release-worker-data here": {client, protocol.NewMap("op", "release-worker-data", "key", "a")},
	}
	for name, tc := range declined {
		if st, ok := tc.fast(frame0(t, tc.m)); ok {
			t.Errorf("%s: taken by the fast path as %+v", name, st)
		}
	}
	// Truncated anywhere: declined, never a panic.
	for _, m := range []*protocol.Map{taken["release-worker-data"].m, taken["client-releases-keys"].m} {
		b := frame0(t, m)
		for cut := range len(b) {
			if _, ok := worker(b[:cut]); ok {
				t.Fatalf("a worker op cut at %d of %d bytes was taken", cut, len(b))
			}
			if _, ok := client(b[:cut]); ok {
				t.Fatalf("a client op cut at %d of %d bytes was taken", cut, len(b))
			}
		}
	}
}

// Without a stimulus_id a stimulus is named f"{prefix}-{time}", as
// distributed names its own.
func TestStimulusBaseNamesAStimulusWithoutAnID(t *testing.T) {
	now := time.Unix(1700000000, 123)
	if b := stimulusBase("", "client-releases-keys", now); b.ID != "client-releases-keys-1700000000000000123" || !b.At.Equal(now) {
		t.Errorf("got %+v", b)
	}
	if b := stimulusBase("s-1", "x", now); b.ID != "s-1" {
		t.Errorf("got %+v", b)
	}
}

// The fast readers allocate only what their stimulus keeps: the stimulus,
// its key(s), the stimulus id, and for task-finished the start/stops and,
// unless the stream has them already, the type and thread. A reader that declines (release-worker-data offered to
// task-finished's first) allocates nothing.
func TestFastReadersAllocateOnlyWhatTheyKeep(t *testing.T) {
	now := time.Unix(1700000000, 5)
	tf := frame0(t, taskFinishedOp("key", "inc-abc"))
	rwd := frame0(t, protocol.NewMap("op", "release-worker-data", "key", "inc-1", "stimulus_id", "free-keys-1.5"))
	crk := frame0(t, protocol.NewMap("op", "client-releases-keys", "keys", []any{"inc-1"}, "client", "Client-1"))
	reuse := &streamReuse{}
	for _, c := range []struct {
		name string
		max  float64
		read func()
	}{
		{"task-finished", 7, func() { workerOpFast("w", tf, now, nil) }},
		// a stream's repeated type and thread: allocated once
		{"task-finished on a stream", 5, func() { workerOpFast("w", tf, now, reuse) }},
		{"release-worker-data", 3, func() { workerOpFast("w", rwd, now, nil) }},
		{"client-releases-keys", 5, func() { clientOpFast("Client-1", crk, now) }},
		{"declined", 0, func() { taskFinishedFast("w", rwd, now, nil) }},
	} {
		if n := testing.AllocsPerRun(200, c.read); n > c.max {
			t.Errorf("%s: %v allocations per op, want at most %v", c.name, n, c.max)
		}
	}
}

// A stream keeps four thread ids boxed: a fifth replaces the oldest, and
// every id reads back as itself.
func TestStreamReuseThreads(t *testing.T) {
	r := &streamReuse{}
	for round := range 2 {
		for id := int64(1000); id < 1006; id++ {
			if v := r.thread(id); v != any(id) {
				t.Fatalf("round %d: thread(%d) = %v", round, id, v)
			}
		}
	}
	a := r.thread(1005)
	if b := r.thread(1005); a != b {
		t.Fatal("a repeated id is boxed anew")
	}
	var none *streamReuse
	if v := none.thread(7); v != any(int64(7)) {
		t.Fatalf("no reuse: %v", v)
	}
}
