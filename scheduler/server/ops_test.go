package server

import (
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"daskgo/protocol"
)

var update = flag.Bool("update", false, "rewrite the op table of scheduler/server/README.md from Ops")

// TestOpsTable: every RPC handler is in Ops with the status it really has,
// every stream op in Ops is decoded (implemented, no-op) or refused
// (unsupported), and no op is listed twice.
func TestOpsTable(t *testing.T) {
	s := &Server{}
	h, real := s.handlers(), s.implementedHandlers()
	for op, raw := range s.rawHandlers() {
		if h[op] != nil {
			t.Errorf("%s is registered twice: among the handlers and the raw handlers", op)
		}
		h[op], real[op] = raw, raw
	}
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
		if op.Status != StatusImplemented && op.Status != StatusNoop && op.Note == "" {
			t.Errorf("%s: a %s op must say why, and what to do instead", id, op.Status)
		}
		if strings.Contains(op.Note, "not implemented") {
			t.Errorf("%s: %q: every op is served, or refused with a reason", id, op.Note)
		}
		switch op.Kind {
		case "rpc":
			if h[op.Op] == nil {
				t.Errorf("%s has no handler", id)
			}
			if op.Status == StatusUnsupported && real[op.Op] != nil {
				t.Errorf("%s is marked unsupported but has a real handler", id)
			}
			if op.Status != StatusUnsupported && real[op.Op] == nil {
				t.Errorf("%s is marked %s but has no real handler", id, op.Status)
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

// The op table of scheduler/server/README.md (this package's directory,
// where go test runs) sits between these markers.
const (
	readmePath = "README.md"
	opsBegin   = "<!-- ops table: begin -->\n"
	opsEnd     = "<!-- ops table: end -->\n"
)

// TestOpsMarkdown: the op table of scheduler/server/README.md is Ops
// rendered (-update rewrites it), so a new op in Ops, or a changed status,
// shows up there.
func TestOpsMarkdown(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	i, j := strings.Index(text, opsBegin), strings.Index(text, opsEnd)
	if i < 0 || j < i {
		t.Fatalf("scheduler/server/README.md has no %q ... %q section", strings.TrimSpace(opsBegin), strings.TrimSpace(opsEnd))
	}
	got, want := text[i+len(opsBegin):j], opsMarkdown()
	if *update && got != want {
		text = text[:i+len(opsBegin)] + want + text[j:]
		if err := os.WriteFile(readmePath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != want {
		t.Fatal("the op table of scheduler/server/README.md is stale: go test ./scheduler/server -run TestOpsMarkdown -update")
	}
}
