package server

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"daskgo/protocol"
)

var update = flag.Bool("update", false, "rewrite OPS.md from Ops")

// TestOpsTable: every RPC handler is in Ops with the status it really has,
// every stream op in Ops is decoded (implemented, no-op) or refused
// (unsupported), and no op is listed twice.
func TestOpsTable(t *testing.T) {
	s := &Server{}
	h := s.handlers()
	seen := map[string]bool{}
	for _, op := range Ops {
		id := op.Kind + ":" + op.Op
		if seen[id] {
			t.Errorf("%s listed twice", id)
		}
		seen[id] = true
		if op.Feature == "" && op.Status != StatusImplemented {
			t.Errorf("%s: a %s op must name its feature", id, op.Status)
		}
		switch op.Kind {
		case "rpc":
			if h[op.Op] == nil {
				t.Errorf("%s has no handler", id)
			}
		case "stream":
			checkStreamOp(t, op)
		default:
			t.Errorf("%s: unknown kind", id)
		}
	}
	for name := range h {
		if !seen["rpc:"+name] {
			t.Errorf("handler %q is not in Ops", name)
		}
	}
}

// checkStreamOp feeds the op to both stream decoders: an implemented op
// must not be refused by both, an unsupported one must be refused.
func checkStreamOp(t *testing.T, op OpInfo) {
	m := protocol.NewMap("op", op.Op)
	_, _, cerr := clientStimulus("c", m, time.Unix(1, 0))
	_, _, werr := workerStimulus("w", m, time.Unix(1, 0))
	refused := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "not supported") || err != nil && strings.Contains(err.Error(), "unknown op")
	}
	both := refused(cerr) && refused(werr)
	if op.Status == StatusUnsupported && !both {
		t.Errorf("stream op %s is marked unsupported but a decoder accepts it", op.Op)
	}
	if op.Status != StatusUnsupported && both {
		t.Errorf("stream op %s is marked %s but both decoders refuse it", op.Op, op.Status)
	}
}

// TestOpsMarkdown: OPS.md is Ops rendered (-update rewrites it).
func TestOpsMarkdown(t *testing.T) {
	want := opsMarkdown()
	if *update {
		if err := os.WriteFile("OPS.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("OPS.md")
	if err != nil {
		t.Fatalf("read OPS.md (run with -update): %v", err)
	}
	if string(got) != want {
		t.Fatal("OPS.md is stale: go test ./scheduler/server -run TestOpsMarkdown -update")
	}
}
