package scheduler

import "daskgo/protocol"

// keyCache remembers the tasks that last reached memory, by a hash of their
// key, for add-keys: a worker reports a replica it fetched (one add-keys
// per transfer), nearly always of a task finished moments before, and at
// 1M tasks the lookup in State.tasks cost about 0.4 µs per task in cache
// and TLB misses (scripts/sim/results/engine-throughput.md). A direct-mapped
// table of 16K slots stays in the processor's caches. It is only a
// shortcut, like runIndex: a hit counts only for the same key on a task not
// forgotten, which is then s.tasks.get(key); a miss falls back to State.tasks.
// Forgetting a task clears its slot, so the table pins no forgotten task.
type keyCache struct {
	slots []*TaskState
}

const keyCacheSlots = 1 << 14

// keySlot is FNV-1a of the key's bytes, folded to a slot: deterministic,
// and cheap for the short keys dask uses.
func keySlot(k protocol.Key) int {
	h := uint32(2166136261)
	for i := 0; i < len(k); i++ {
		h = (h ^ uint32(k[i])) * 16777619
	}
	return int(h>>16^h) & (keyCacheSlots - 1)
}

// put remembers ts, which just reached memory.
func (c *keyCache) put(ts *TaskState) {
	if c.slots == nil {
		c.slots = make([]*TaskState, keyCacheSlots)
	}
	c.slots[keySlot(ts.Key)] = ts
}

// find returns the task of key k if the table remembers it.
func (c *keyCache) find(k protocol.Key) *TaskState {
	if c.slots == nil {
		return nil
	}
	if ts := c.slots[keySlot(k)]; ts != nil && ts.state != StatusForgotten && ts.Key == k {
		return ts
	}
	return nil
}

// drop forgets ts (being forgotten) if it holds its slot.
func (c *keyCache) drop(ts *TaskState) {
	if c.slots == nil {
		return
	}
	if i := keySlot(ts.Key); c.slots[i] == ts {
		c.slots[i] = nil
	}
}
