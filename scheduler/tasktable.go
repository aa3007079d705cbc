package scheduler

import (
	"iter"

	"daskgo/protocol"
)

// taskTable is State.tasks: every task by its key. At a million tasks the
// Go map[Key]*TaskState's insert and delete were about 0.7 µs per task in
// a profile of the engine (scripts/sim/results/engine-throughput.md): each
// probes a control word, a key header and the key's bytes, three places in
// a big heap. Here a slot is the key's hash beside the task: an insert
// writes one slot, a delete finds its task by pointer (no key compared),
// and a lookup reads the key only where the whole hash matches. It took
// 3 % off the engine's CPU per task on the 1M-task tree.
//
// Linear probing, at most 3/4 full, deletion by backward shift (no
// tombstones, so a table emptied and refilled probes as a fresh one).
// Iteration order is the slots' then the segments', which depends on the
// per-process random seed of keyIndexHash: like a Go map's, no decision
// may depend on it. The slots and the segments' key indices share that
// hash, so a lookup hashes its key once.
//
// The tasks of a big graph are held instead by a segment over the graph's
// own key index (tasktable_segment.go).
type taskTable struct {
	slots   []taskSlot // len a power of two, or nil
	n       int        // tasks in the slots
	segs    []*tableSegment
	segLive int // tasks in the segments
	peak    int // the most tasks held since the last reset
}

type taskSlot struct {
	h  uint64     // hash of ts.Key; meaningful only when ts != nil
	ts *TaskState // nil: empty
}

const taskTableMin = 16

// Len is the number of tasks held.
func (t *taskTable) Len() int { return t.n + t.segLive }

// sizeFor returns a table of room for n tasks, emptying t.
func (t *taskTable) sizeFor(n int) {
	size := taskTableMin
	for size*3 < n*4 {
		size *= 2
	}
	t.reset()
	t.slots = make([]taskSlot, size)
}

// reset empties t and gives its slots back to the collector.
func (t *taskTable) reset() {
	for _, sg := range t.segs {
		for _, ts := range sg.own {
			if ts != nil {
				ts.seg, ts.segPos = nil, 0
			}
		}
	}
	t.slots, t.n, t.segs, t.segLive, t.peak = nil, 0, nil, 0, 0
}

// get returns the task of key k, or nil.
func (t *taskTable) get(k protocol.Key) *TaskState {
	h := keyIndexHash(k)
	if ts := t.slotsGet(k, h); ts != nil || len(t.segs) == 0 {
		return ts
	}
	return t.segGet(k, h)
}

// slotsGet is get in the slots; h is keyIndexHash(k).
func (t *taskTable) slotsGet(k protocol.Key, h uint64) *TaskState {
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.ts == nil {
			return nil
		}
		if s.h == h && s.ts.Key == k {
			return s.ts
		}
	}
}

// put sets ts as the task of its key, replacing the one held, as a map
// assignment does. The probe compares a key only where the whole hash
// matches, so a new key costs the walk to an empty slot.
func (t *taskTable) put(ts *TaskState) { t.putHashed(ts, keyIndexHash(ts.Key)) }

// putHashed is put with h = keyIndexHash(ts.Key).
func (t *taskTable) putHashed(ts *TaskState, h uint64) {
	if len(t.segs) > 0 {
		if old := t.segGet(ts.Key, h); old != nil && old != ts {
			t.segRemove(old)
		}
	}
	t.putSlots(ts, h)
}

// putSlots is put in the slots; h is keyIndexHash(ts.Key).
func (t *taskTable) putSlots(ts *TaskState, h uint64) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	mask := len(t.slots) - 1
	i := int(h) & mask
	for ; t.slots[i].ts != nil; i = (i + 1) & mask {
		if s := &t.slots[i]; s.h == h && s.ts.Key == ts.Key {
			s.ts = ts
			return
		}
	}
	t.slots[i] = taskSlot{h, ts}
	t.n++
	t.peak = max(t.peak, t.Len())
}

func (t *taskTable) place(s taskSlot) {
	mask := len(t.slots) - 1
	i := int(s.h) & mask
	for t.slots[i].ts != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

func (t *taskTable) grow() {
	old := t.slots
	t.slots = make([]taskSlot, max(taskTableMin, 2*len(old)))
	for _, s := range old {
		if s.ts != nil {
			t.place(s)
		}
	}
}

// remove deletes ts if t holds it.
func (t *taskTable) remove(ts *TaskState) {
	if ts.seg != nil {
		t.segRemove(ts)
		return
	}
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := int(ts.keyHash) & mask // the low half of the hash: mask is below 2^32
	for t.slots[i].ts != ts {
		if t.slots[i].ts == nil {
			return
		}
		i = (i + 1) & mask
	}
	t.slots[i] = taskSlot{}
	t.n--
	// backward shift: pull later entries of the run into the hole when it
	// lies on their probe path (home cyclically outside (hole, j])
	for j := (i + 1) & mask; t.slots[j].ts != nil; j = (j + 1) & mask {
		home := int(t.slots[j].h) & mask
		var stays bool
		if i <= j {
			stays = i < home && home <= j
		} else {
			stays = home > i || home <= j
		}
		if !stays {
			t.slots[i], t.slots[j] = t.slots[j], taskSlot{}
			i = j
		}
	}
}

// all yields every task with its key; t must not change meanwhile.
func (t *taskTable) all() iter.Seq2[protocol.Key, *TaskState] {
	return func(yield func(protocol.Key, *TaskState) bool) {
		for _, s := range t.slots {
			if s.ts != nil && !yield(s.ts.Key, s.ts) {
				return
			}
		}
		for _, sg := range t.segs {
			for _, ts := range sg.own {
				if ts != nil && !yield(ts.Key, ts) {
					return
				}
			}
		}
	}
}
