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

// keySlot folds h, the low half of keyIndexHash (TaskState.keyHash), to a
// slot. The task's stored half serves put and drop, so only a lookup by a
// key from a message hashes its bytes: those of a task that finished a while
// ago are mostly out of the cache by the time it reaches memory or is
// forgotten.
func keySlot(h uint32) int { return int(h) & (keyCacheSlots - 1) }

// put remembers ts, which just reached memory.
func (c *keyCache) put(ts *TaskState) {
	if c.slots == nil {
		c.slots = make([]*TaskState, keyCacheSlots)
	}
	c.slots[keySlot(ts.keyHash)] = ts
}

// find returns the task of key k if the table remembers it.
func (c *keyCache) find(k protocol.Key) *TaskState {
	if c.slots == nil {
		return nil
	}
	if ts := c.slots[keySlot(uint32(keyIndexHash(k)))]; ts != nil && ts.state != StatusForgotten && ts.Key == k {
		return ts
	}
	return nil
}

// drop forgets ts (being forgotten) if it holds its slot.
func (c *keyCache) drop(ts *TaskState) {
	if c.slots == nil {
		return
	}
	if i := keySlot(ts.keyHash); c.slots[i] == ts {
		c.slots[i] = nil
	}
}
