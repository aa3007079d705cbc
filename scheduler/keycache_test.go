package scheduler

import (
	"strconv"
	"testing"

	"daskgo/protocol"
)

// The key cache finds a remembered task by key, misses on a key it does
// not hold or a forgotten task, and forgets a task only from its own slot.
func TestKeyCache(t *testing.T) {
	var c keyCache
	a := &TaskState{Key: protocol.StrKey("a"), state: StatusMemory}
	if c.find(a.Key) != nil {
		t.Fatal("an empty cache found a task")
	}
	c.put(a)
	if c.find(a.Key) != a {
		t.Fatal("a remembered task was not found")
	}
	if c.find(protocol.StrKey("b")) != nil {
		t.Error("found a key never put")
	}
	// a task sharing a's slot replaces it; dropping a then leaves it be
	var b *TaskState
	for i := 0; b == nil; i++ {
		k := protocol.StrKey("k-" + strconv.Itoa(i))
		if keySlot(k) == keySlot(a.Key) {
			b = &TaskState{Key: k, state: StatusMemory}
		}
	}
	c.put(b)
	c.drop(a)
	if c.find(b.Key) != b || c.find(a.Key) != nil {
		t.Error("dropping an evicted task cleared its successor's slot")
	}
	b.state = StatusForgotten
	if c.find(b.Key) != nil {
		t.Error("found a forgotten task")
	}
	c.drop(b)
	if c.slots[keySlot(b.Key)] != nil {
		t.Error("drop left the task in its slot")
	}
}
