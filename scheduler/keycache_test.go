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
	task := func(k protocol.Key) *TaskState {
		return &TaskState{Key: k, state: StatusMemory, keyHash: uint32(keyIndexHash(k))}
	}
	a := task(protocol.StrKey("a"))
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
		if b0 := task(k); keySlot(b0.keyHash) == keySlot(a.keyHash) {
			b = b0
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
	if c.slots[keySlot(b.keyHash)] != nil {
		t.Error("drop left the task in its slot")
	}
}
