package scheduler

import (
	"hash/maphash"

	"daskgo/protocol"
)

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

// keyCacheSeed seeds keySlot. A slot only decides whether a lookup is a
// hit, never a result, so the seed may differ between processes.
var keyCacheSeed = maphash.MakeSeed()

// keySlot is the key's hash folded to a slot. maphash, not a byte-wise
// FNV-1a: on a 52-byte key like dask's ("('sum-aggregate-<token>', 258)"
// packed) FNV took 40 ns and maphash 5.5 (a one-off benchmark on this
// machine; equal at 5 ns on an 8-byte key), and put, find and drop each
// hash the key once per task.
func keySlot(k protocol.Key) int {
	return int(maphash.String(keyCacheSeed, string(k))) & (keyCacheSlots - 1)
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
