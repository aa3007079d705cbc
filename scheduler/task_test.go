package scheduler

import (
	"testing"
	"unsafe"

	"daskgo/protocol"
)

// TestTaskStateSize: a TaskState fills the 352-byte size class; a field
// more moves every task to the 384-byte class (32 bytes a task, 6.4 MB on
// a 200k-task graph). GraphTask, alive for a whole graph while it is
// applied, stays at 96 bytes.
func TestTaskStateSize(t *testing.T) {
	if size := unsafe.Sizeof(TaskState{}); size > 352 {
		t.Fatalf("TaskState is %d bytes, past the 352-byte size class", size)
	}
	if size := unsafe.Sizeof(GraphTask{}); size > 96 {
		t.Fatalf("GraphTask is %d bytes, want at most 96", size)
	}
}

// TestKeyAnyAllocatesNothing: a message's key points at the task's Key,
// equal to the key boxed the usual way.
func TestKeyAnyAllocatesNothing(t *testing.T) {
	ts := &TaskState{Key: protocol.StrKey("x-1")}
	if n := testing.AllocsPerRun(100, func() { _ = ts.keyAny() }); n != 0 {
		t.Fatalf("keyAny allocated %v times", n)
	}
	if ts.keyAny() != any(protocol.StrKey("x-1")) {
		t.Fatalf("keyAny is %#v", ts.keyAny())
	}
}

// TestKindOfInterns: one copy per kind name, whatever string it came in,
// and a task's kind reads back as its name.
func TestKindOfInterns(t *testing.T) {
	s := newTestState(t)
	a := s.kindOf(string([]byte("Task")))
	b := s.kindOf("Alias")
	if b == a || s.kindNames[b-1] != "Alias" {
		t.Fatalf("Alias interned as %d (%q)", b, s.kindNames)
	}
	if c := s.kindOf(string([]byte("Task"))); c != a || len(s.kindNames) != 2 {
		t.Fatalf("Task interned twice: %d %d (%q)", a, c, s.kindNames)
	}
	ts := &TaskState{kind: b}
	if got := s.kindName(ts); got != "Alias" {
		t.Fatalf("kindName = %q, want Alias", got)
	}
	if got := s.kindName(&TaskState{}); got != "" {
		t.Fatalf("kindName before a spec = %q, want empty", got)
	}
}
