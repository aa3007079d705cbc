package scheduler

import (
	"hash/maphash"

	"daskgo/protocol"
)

// graphIndex is a materialized graph indexed by key. Per-entry slices
// (seen, touched, tasks) replace per-key maps: with 100k-task graphs every
// avoided hash lookup counts. Each key is hashed once: hasLostDependencies
// records where the requested keys and every reachable entry's Deps are
// (keyIdx, deps), and generateTaskStates reuses those indices.
type graphIndex struct {
	tasks []GraphTask
	index keyIndex
	ts    []*TaskState // the TaskState of each entry once generated
	// keyIdx[n] is the entry of the n-th requested key, -1 if not in the
	// graph; deps[depAt[i]+d] is the entry of tasks[i].Deps[d] (-1 likewise),
	// filled for the entries reachable from the requested keys.
	keyIdx []int32
	depAt  []int32
	deps   []int32
	// seg, when the graph is big enough, holds the tasks it creates
	// (taskTable.adoptSegment), found through index
	seg *tableSegment
	// hash[e] is uint32(keyIndexHash(tasks[e].Key)), the task's keyHash
	hash []uint32
}

func newGraphIndex(tasks []GraphTask) *graphIndex {
	g := &graphIndex{tasks: tasks, index: makeKeyIndex(len(tasks)), ts: make([]*TaskState, len(tasks)),
		hash: make([]uint32, len(tasks))}
	slots := g.index.slots
	mask := len(slots) - 1
	for e := range tasks {
		k := tasks[e].Key
		h := keyIndexHash(k)
		g.hash[e] = uint32(h)
		tag := h & keyTagMask
		for i := int(h) & mask; ; i = (i + 1) & mask {
			// a repeated key takes the slot of its first entry: the last
			// entry wins, as a map assignment does
			if sl := slots[i]; sl == 0 || sl&keyTagMask == tag && tasks[int(uint32(sl))-1].Key == k {
				slots[i] = tag | uint64(uint32(e+1))
				break
			}
		}
	}
	return g
}

// lookup returns k's entry, or -1.
func (g *graphIndex) lookup(k protocol.Key) int32 {
	h := keyIndexHash(k)
	for it := g.index.probe(h); ; {
		e, ok := it.next()
		if !ok {
			return -1
		}
		if g.tasks[e].Key == k {
			return e
		}
	}
}

// keyIndex maps keys to entries (0 .. n-1) of something that holds the keys
// (a graph's tasks, then a segment's tasks), filled by newGraphIndex: a slot is the key's hash's upper
// half beside entry+1, and the key is compared in the holder only where
// that half matches. It holds no key itself, so a segment that outlives
// some of its tasks pins none of their keys, and it takes 16 bytes per
// entry (linear probing at most half full) where a Go map of 1M string
// keys took about 40 and kept every key alive.
type keyIndex struct {
	slots []uint64 // len a power of two; 0: empty
}

var keyIndexSeed = maphash.MakeSeed()

// keyIndexHash is the hash every keyIndex uses (and keyCache, from the half
// a task stores): a key hashed once probes any number of them. maphash, not
// a byte-wise FNV-1a: on a 52-byte key like dask's ("('sum-aggregate-<token>',
// 258)" packed) FNV took 40 ns and maphash 5.5 (a one-off benchmark on this
// machine; equal at 5 ns on an 8-byte key).
func keyIndexHash(k protocol.Key) uint64 { return maphash.String(keyIndexSeed, string(k)) }

const keyTagMask = uint64(0xffffffff) << 32

func makeKeyIndex(n int) keyIndex {
	size := 8
	for size < 2*n {
		size *= 2
	}
	return keyIndex{slots: make([]uint64, size)}
}

// keyProbe walks the slots whose tag matches a hash: the candidates, in
// probe order, until the first empty slot.
type keyProbe struct {
	x    *keyIndex
	i    int
	tag  uint64
	done bool
}

func (x *keyIndex) probe(h uint64) keyProbe {
	return keyProbe{x: x, i: int(h) & (len(x.slots) - 1), tag: h & keyTagMask}
}

// next returns the next candidate entry, or false at the end of the run.
func (p *keyProbe) next() (int32, bool) {
	slots := p.x.slots
	mask := len(slots) - 1
	for !p.done {
		sl := slots[p.i]
		p.i = (p.i + 1) & mask
		if sl == 0 {
			p.done = true
			break
		}
		if sl&keyTagMask == p.tag {
			return int32(uint32(sl)) - 1, true
		}
	}
	return -1, false
}
