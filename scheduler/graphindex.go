package scheduler

import (
	"hash/maphash"

	"daskgo/protocol"
)

// graphIndex is a materialized graph being applied: its GraphKeys (each
// key hashed once, every dependency resolved to an entry, where the graph
// arrived or else when the engine gets it) and what applying it finds per
// entry. Per-entry slices replace per-key maps: with 100k-task graphs
// every avoided hash lookup counts.
type graphIndex struct {
	*GraphKeys
	ts []*TaskState // the TaskState of each entry once generated
	// keyIdx[n] is the entry of the n-th requested key, -1 if not in the
	// graph (hasLostDependencies)
	keyIdx []int32
	// seg, when the graph is big enough, holds the tasks it creates
	// (taskTable.adoptSegment), found through the GraphKeys' index
	seg *tableSegment
}

// graphIndexFor is tasks' graphIndex, over keys when they were made for
// this very slice; otherwise the keys are resolved here.
func graphIndexFor(tasks []GraphTask, keys *GraphKeys) *graphIndex {
	if keys == nil || !keys.indexes(tasks) {
		keys = IndexGraph(tasks)
	}
	return &graphIndex{GraphKeys: keys, ts: make([]*TaskState, len(tasks))}
}

// indexKeys hashes every key of tasks once into a keyIndex. A repeated key
// takes the slot of its first entry and the last entry wins, as a map
// assignment does; dup is the first entry that repeats an earlier key, -1
// if none.
func indexKeys(tasks []GraphTask) (index keyIndex, hash []uint32, dup int32) {
	index, hash, dup = makeKeyIndex(len(tasks)), make([]uint32, len(tasks)), -1
	slots := index.slots
	mask := len(slots) - 1
	for e := range tasks {
		k := tasks[e].Key
		h := keyIndexHash(k)
		hash[e] = uint32(h)
		tag := h & keyTagMask
		for i := int(h) & mask; ; i = (i + 1) & mask {
			sl := slots[i]
			if sl == 0 {
				slots[i] = tag | uint64(uint32(e+1))
				break
			}
			if sl&keyTagMask == tag && tasks[int(uint32(sl))-1].Key == k {
				slots[i] = tag | uint64(uint32(e+1))
				if dup < 0 {
					dup = int32(e)
				}
				break
			}
		}
	}
	return index, hash, dup
}

// GraphKeys is a graph's keys resolved once, where the graph arrives (the
// materializer's answer in compat, the simulator's graphs): every key
// hashed into an index, every dependency found in it. compat culls and
// orders with it, and the engine applies the graph with it instead of
// hashing every key and probing for every dependency a second time: key
// probes at the edge, entries inside. A graph that comes without one (the
// engine's tests) gets one when the engine applies it. Read-only once made
// (the engine may keep its index for a big graph's tasks, tableSegment).
type GraphKeys struct {
	tasks []GraphTask
	index keyIndex
	hash  []uint32 // uint32(keyIndexHash(tasks[e].Key))
	depAt []int32  // dep[depAt[e]:depAt[e+1]] are the entries of tasks[e].Deps
	dep   []int32  // -1: a key the graph does not hold
	// external counts the -1s of dep: with none, no dependency can be lost
	external int
	dup      int32
}

// IndexGraph resolves tasks' keys and dependencies.
func IndexGraph(tasks []GraphTask) *GraphKeys {
	index, hash, dup := indexKeys(tasks)
	k := &GraphKeys{tasks: tasks, index: index, hash: hash, dup: dup, depAt: make([]int32, len(tasks)+1)}
	n := 0
	for i := range tasks {
		n += len(tasks[i].Deps)
	}
	k.dep = make([]int32, 0, n)
	for i := range tasks {
		k.depAt[i] = int32(len(k.dep))
		for _, d := range tasks[i].Deps {
			j := k.Lookup(d)
			if j < 0 {
				k.external++
			}
			k.dep = append(k.dep, j)
		}
	}
	k.depAt[len(tasks)] = int32(len(k.dep))
	return k
}

// Lookup returns key's entry, or -1 (the last entry of a repeated key).
func (k *GraphKeys) Lookup(key protocol.Key) int32 {
	return k.index.lookup(k.tasks, key)
}

// Deps are the entries of tasks[e].Deps, -1 for a key outside the graph;
// read-only.
func (k *GraphKeys) Deps(e int) []int32 { return k.dep[k.depAt[e]:k.depAt[e+1]:k.depAt[e+1]] }

// Duplicate is the first entry whose key an earlier entry has, or -1.
func (k *GraphKeys) Duplicate() int32 { return k.dup }

// indexes reports whether k was made for this very slice of tasks.
func (k *GraphKeys) indexes(tasks []GraphTask) bool {
	return len(k.tasks) == len(tasks) && (len(tasks) == 0 || &k.tasks[0] == &tasks[0])
}

// lookup returns k's entry among tasks, the keys x indexes, or -1.
func (x *keyIndex) lookup(tasks []GraphTask, k protocol.Key) int32 {
	h := keyIndexHash(k)
	for it := x.probe(h); ; {
		e, ok := it.next()
		if !ok {
			return -1
		}
		if tasks[e].Key == k {
			return e
		}
	}
}

// keyIndex maps keys to entries (0 .. n-1) of something that holds the keys
// (a graph's tasks, then a segment's tasks), filled by indexKeys: a slot is the key's hash's upper
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
