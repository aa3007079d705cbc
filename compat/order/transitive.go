package order

import (
	"math/bits"
	"slices"
)

// transitiveSets holds the frozensets _connecting_to_roots builds: which
// roots (or, with the graph reversed, which leaves) each node reaches.
// Objects are int32 ids. dask deduplicates the unions it creates through a
// dict keyed by the frozenset, and every other object is a root's own
// singleton, so two objects are the same Python object exactly when their
// contents are equal. tableSets keeps that invariant (the first of equal
// unions fixes the layout all share); sortedSets may keep small equal
// unions apart, which no result can tell (see its union).
type transitiveSets interface {
	singleton(k int32) int32 // frozenset({k})
	empty() int32            // the final frozenset() of every root
	size(obj int32) int
	subset(a, b int32) bool // a.issubset(b)
	// union is set(objs[0]), .update(each later one), frozenset(), then the
	// dedup_mapping lookup: an equal earlier union is returned instead.
	union(objs []int32) int32
}

// dedupIndex maps a content hash to the objects with that hash.
type dedupIndex struct {
	first map[uint64]int32
	more  map[uint64][]int32 // rare collisions
}

func (d *dedupIndex) find(h uint64, equal func(obj int32) bool) int32 {
	if obj, ok := d.first[h]; ok {
		if equal(obj) {
			return obj
		}
		for _, o := range d.more[h] {
			if equal(o) {
				return o
			}
		}
	}
	return -1
}

func (d *dedupIndex) add(h uint64, obj int32) {
	if d.first == nil {
		d.first = map[uint64]int32{}
	}
	if _, ok := d.first[h]; !ok {
		d.first[h] = obj
		return
	}
	if d.more == nil {
		d.more = map[uint64][]int32{}
	}
	d.more[h] = append(d.more[h], obj)
}

// mix64 is a splitmix64 finalizer: content hashes are sums of it over the
// members, so they do not depend on member order.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// sortedSets keeps contents only, as sorted member lists in one arena: the
// root side (roots_connected) is read through len() and identity alone,
// never iterated, so its CPython layout is irrelevant. Memory is 4 bytes
// per member; a 1M-task reduction tree stores about 10M.
type sortedSets struct {
	start   []int // object i is arena[start[i]:start[i+1]]
	arena   []int32
	dedup   dedupIndex
	a, b    []int32 // union scratch
	mark    []bool  // node-indexed scratch for wide unions
	emptyID int32
}

func newSortedSets(nodes int) *sortedSets {
	s := &sortedSets{start: make([]int, 1, nodes+1), mark: make([]bool, nodes), emptyID: -1}
	return s
}

func (s *sortedSets) members(obj int32) []int32 { return s.arena[s.start[obj]:s.start[obj+1]] }

func (s *sortedSets) push(m []int32) int32 {
	s.arena = append(s.arena, m...)
	s.start = append(s.start, len(s.arena))
	return int32(len(s.start) - 2)
}

// reserve makes room for n more members, doubling: append alone grows
// large slices by a quarter, which copies a big arena over and over.
func (s *sortedSets) reserve(n int) {
	if cap(s.arena)-len(s.arena) >= n {
		return
	}
	grown := make([]int32, len(s.arena), max(2*cap(s.arena), len(s.arena)+n, 1024))
	copy(grown, s.arena)
	s.arena = grown
}

func (s *sortedSets) singleton(k int32) int32 {
	s.reserve(1)
	s.arena = append(s.arena, k)
	s.start = append(s.start, len(s.arena))
	return int32(len(s.start) - 2)
}

func (s *sortedSets) empty() int32 {
	if s.emptyID < 0 {
		s.emptyID = s.push(nil)
	}
	return s.emptyID
}

func (s *sortedSets) size(obj int32) int { return s.start[obj+1] - s.start[obj] }

func (s *sortedSets) subset(a, b int32) bool {
	ma, mb := s.members(a), s.members(b)
	if len(ma) > len(mb) {
		return false
	}
	if len(ma)*bits.Len(uint(len(mb))) < len(mb) { // few probes: binary search
		for _, k := range ma {
			if _, ok := slices.BinarySearch(mb, k); !ok {
				return false
			}
		}
		return true
	}
	j := 0
	for _, k := range ma {
		for j < len(mb) && mb[j] < k {
			j++
		}
		if j == len(mb) || mb[j] != k {
			return false
		}
	}
	return true
}

// union writes the union straight after the arena's end (the operands are
// read from below it, or from the old array if append moves it) and keeps
// it unless an equal large set exists. Dedup only saves memory on this
// side: equal root sets always have equal max_dependents, so which of two
// equal objects a node gets cannot change a result; small unions are not
// worth the map lookup.
func (s *sortedSets) union(objs []int32) int32 {
	need := 0
	for _, o := range objs {
		need += s.size(o)
	}
	s.reserve(need)
	base := len(s.arena)
	switch {
	case len(objs) == 2:
		s.arena = mergeSorted(s.arena, s.members(objs[0]), s.members(objs[1]))
	case len(objs) <= 4: // pairwise merges: linear in the sizes
		u := append(s.a[:0], s.members(objs[0])...)
		for _, o := range objs[1:] {
			s.b = mergeSorted(s.b[:0], u, s.members(o))
			u, s.b = s.b, u
		}
		s.a = u
		s.arena = append(s.arena, u...)
	default: // many operands: collect once, then sort
		for _, o := range objs {
			for _, k := range s.members(o) {
				if !s.mark[k] {
					s.mark[k] = true
					s.arena = append(s.arena, k)
				}
			}
		}
		u := s.arena[base:]
		for _, k := range u {
			s.mark[k] = false
		}
		slices.Sort(u)
	}
	u := s.arena[base:]
	if len(u) < dedupMinSize {
		s.start = append(s.start, len(s.arena))
		return int32(len(s.start) - 2)
	}
	var h uint64
	for _, k := range u {
		h += mix64(uint64(k))
	}
	if obj := s.dedup.find(h, func(o int32) bool { return slices.Equal(s.members(o), u) }); obj >= 0 {
		s.arena = s.arena[:base]
		return obj
	}
	s.start = append(s.start, len(s.arena))
	obj := int32(len(s.start) - 2)
	s.dedup.add(h, obj)
	return obj
}

// dedupMinSize is the smallest root-set union worth deduplicating.
const dedupMinSize = 32

func mergeSorted(dst, x, y []int32) []int32 {
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] < y[j]:
			dst = append(dst, x[i])
			i++
		case x[i] > y[j]:
			dst = append(dst, y[j])
			j++
		default:
			dst = append(dst, x[i])
			i++
			j++
		}
	}
	dst = append(dst, x[i:]...)
	return append(dst, y[j:]...)
}

// tableSets keeps each object's exact CPython table, because the leaf side
// (leafs_connected) is iterated when a root is added to the result, and the
// order it yields leaves in shapes leafs_per_degree's tables. Singletons,
// most objects, store just their key: frozenset({k}) is k at its home slot
// of an 8-slot table.
type tableSets struct {
	hs      []uint64
	objs    []tableObj
	arena   []int32 // the tables of non-singleton objects
	dedup   dedupIndex
	res     pySet // union scratch: set(d) then .update(...)
	frozen  pySet // union scratch: frozenset(res)
	small   [setMinSize]int32
	emptyID int32
}

// tableObj is a table in the arena, or a singleton (size 1: arena[off] is
// the key), or the empty set (size 0).
type tableObj struct {
	off  int
	size int32
	used int32
}

func newTableSets(hs []uint64) *tableSets {
	t := &tableSets{hs: hs, emptyID: -1}
	t.res.recycle, t.frozen.recycle = true, true
	t.res.clear()
	t.frozen.clear()
	return t
}

func (t *tableSets) singleton(k int32) int32 {
	t.arena = append(t.arena, k)
	t.objs = append(t.objs, tableObj{off: len(t.arena) - 1, size: 1, used: 1})
	return int32(len(t.objs) - 1)
}

func (t *tableSets) empty() int32 {
	if t.emptyID < 0 {
		t.objs = append(t.objs, tableObj{})
		t.emptyID = int32(len(t.objs) - 1)
	}
	return t.emptyID
}

func (t *tableSets) size(obj int32) int { return int(t.objs[obj].used) }

// asSet presents an object as a set to read from (set_merge, lookups). A
// singleton is drawn into a shared 8-slot scratch table, valid until the
// next call.
func (t *tableSets) asSet(obj int32) pySet {
	o := t.objs[obj]
	switch o.size {
	case 0:
		return pySet{slots: t.small[:0]}
	case 1:
		for i := range t.small {
			t.small[i] = slotEmpty
		}
		k := t.arena[o.off]
		t.small[t.hs[k]&(setMinSize-1)] = k
		return pySet{slots: t.small[:], fill: 1, used: 1}
	}
	slots := t.arena[o.off : o.off+int(o.size)]
	return pySet{slots: slots, fill: int(o.used), used: int(o.used)}
}

// appendMembers appends obj's members in iteration order.
func (t *tableSets) appendMembers(dst []int32, obj int32) []int32 {
	o := t.objs[obj]
	if o.size == 1 {
		return append(dst, t.arena[o.off])
	}
	for _, k := range t.arena[o.off : o.off+int(o.size)] {
		if k >= 0 {
			dst = append(dst, k)
		}
	}
	return dst
}

func (t *tableSets) contains(obj, k int32) bool {
	o := t.objs[obj]
	switch o.size {
	case 0:
		return false
	case 1:
		return t.arena[o.off] == k
	}
	s := t.asSet(obj)
	return s.contains(t.hs, k)
}

func (t *tableSets) subset(a, b int32) bool {
	oa := t.objs[a]
	if oa.used > t.objs[b].used {
		return false
	}
	if oa.size == 1 {
		return t.contains(b, t.arena[oa.off])
	}
	for _, k := range t.arena[oa.off : oa.off+int(oa.size)] {
		if k >= 0 && !t.contains(b, k) {
			return false
		}
	}
	return true
}

func (t *tableSets) union(objs []int32) int32 {
	t.res.clear()
	for _, o := range objs {
		src := t.asSet(o)
		t.res.mergeSet(t.hs, &src)
	}
	t.frozen.clear()
	t.frozen.mergeSet(t.hs, &t.res)
	var h uint64
	for _, k := range t.frozen.slots {
		if k >= 0 {
			h += mix64(uint64(k))
		}
	}
	equal := func(obj int32) bool {
		if int(t.objs[obj].used) != t.frozen.used {
			return false
		}
		for _, k := range t.frozen.slots {
			if k >= 0 && !t.contains(obj, k) {
				return false
			}
		}
		return true
	}
	if obj := t.dedup.find(h, equal); obj >= 0 {
		return obj
	}
	if need := len(t.frozen.slots); cap(t.arena)-len(t.arena) < need { // grow by doubling
		grown := make([]int32, len(t.arena), max(2*cap(t.arena), len(t.arena)+need))
		copy(grown, t.arena)
		t.arena = grown
	}
	t.arena = append(t.arena, t.frozen.slots...)
	t.objs = append(t.objs, tableObj{
		off:  len(t.arena) - len(t.frozen.slots),
		size: int32(len(t.frozen.slots)),
		used: int32(t.frozen.used),
	})
	obj := int32(len(t.objs) - 1)
	t.dedup.add(h, obj)
	return obj
}
