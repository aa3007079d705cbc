package order

// An emulation of CPython 3.11's set and frozenset hash table
// (Objects/setobject.c), over node ids instead of objects. dask.order
// iterates sets in many places (the critical path extends with a set
// difference, dependents are visited in set order, ties go to the first
// element met), so its result is defined only together with the exact slot
// layout CPython produces. Every function below mirrors one C function and
// keeps its name in the comment; pyset_test.go replays random operation
// sequences run by the real interpreter and compares list(s) after each.
//
// Table invariants (as in C): len(slots) is a power of two ≥ 8; fill counts
// active + dummy slots, used counts active ones; fill < len(slots), so every
// probe sequence meets an empty slot. A slot holds a node id ≥ 0, slotEmpty
// or slotDummy. Two distinct node ids are never equal keys (the graph's keys
// are distinct under Python equality), so key comparison is id comparison,
// and the hash of a member is looked up in the caller's hash slice.

const (
	slotEmpty int32 = -1
	slotDummy int32 = -2

	linearProbes = 9 // LINEAR_PROBES
	perturbShift = 5 // PERTURB_SHIFT
	setMinSize   = 8 // PySet_MINSIZE
)

// pySet is one set or frozenset object.
type pySet struct {
	slots  []int32
	fill   int
	used   int
	finger int // set_pop's search finger
	// recycle marks a scratch set reused for many short-lived values: its
	// resizes swap between two buffers instead of allocating.
	recycle bool
	spare   []int32
}

// newPySet is make_new_set without an iterable: an empty 8-slot table.
func newPySet() *pySet {
	s := &pySet{}
	s.clear()
	return s
}

// clear empties the set into its minimal table (set_empty_to_minsize),
// reusing the slice when it can.
func (s *pySet) clear() {
	if cap(s.slots) >= setMinSize {
		s.slots = s.slots[:setMinSize]
	} else {
		s.slots = make([]int32, setMinSize)
	}
	for i := range s.slots {
		s.slots[i] = slotEmpty
	}
	s.fill, s.used, s.finger = 0, 0, 0
}

func (s *pySet) len() int { return s.used }

func (s *pySet) mask() int { return len(s.slots) - 1 }

// appendTo appends the members in iteration (slot) order.
func (s *pySet) appendTo(dst []int32) []int32 {
	for _, k := range s.slots {
		if k >= 0 {
			dst = append(dst, k)
		}
	}
	return dst
}

// lookup is set_lookkey: the slot holding k, or -1. Dummies never match
// (their C hash is -1, which no key has) and do not stop the probe.
func (s *pySet) lookup(hs []uint64, k int32) int {
	h := hs[k]
	mask := uint64(s.mask())
	perturb := h
	i := h & mask
	for {
		probes := 0
		if i+linearProbes <= mask {
			probes = linearProbes
		}
		for j := i; ; j++ {
			switch s.slots[j] {
			case slotEmpty:
				return -1
			case k:
				return int(j)
			}
			if probes == 0 {
				break
			}
			probes--
		}
		perturb >>= perturbShift
		i = (i*5 + 1 + perturb) & mask
	}
}

func (s *pySet) contains(hs []uint64, k int32) bool { return s.lookup(hs, k) >= 0 }

// add is set_add_entry: the new key goes to the last dummy met on its probe
// path before an empty slot, else to that empty slot, after which the table
// grows once it is 60% full.
func (s *pySet) add(hs []uint64, k int32) {
	h := hs[k]
	mask := uint64(s.mask())
	perturb := h
	i := h & mask
	freeslot := -1
	for {
		probes := 0
		if i+linearProbes <= mask {
			probes = linearProbes
		}
		for j := i; ; j++ {
			switch s.slots[j] {
			case slotEmpty:
				if freeslot >= 0 {
					s.slots[freeslot] = k
					s.used++
					return
				}
				s.slots[j] = k
				s.fill++
				s.used++
				if uint64(s.fill)*5 >= mask*3 {
					s.resize(hs, s.growTarget())
				}
				return
			case k:
				return
			case slotDummy:
				freeslot = int(j)
			}
			if probes == 0 {
				break
			}
			probes--
		}
		perturb >>= perturbShift
		i = (i*5 + 1 + perturb) & mask
	}
}

// growTarget is the minused argument CPython passes when a table fills up.
func (s *pySet) growTarget() int {
	if s.used > 50000 {
		return s.used * 2
	}
	return s.used * 4
}

// discard is set_discard_entry: the slot becomes a dummy, fill is unchanged.
func (s *pySet) discard(hs []uint64, k int32) bool {
	j := s.lookup(hs, k)
	if j < 0 {
		return false
	}
	s.slots[j] = slotDummy
	s.used--
	return true
}

// pop is set_pop: the first active slot from the finger on, wrapping.
func (s *pySet) pop() int32 {
	if s.used == 0 {
		panic("order: pop from an empty set")
	}
	mask := s.mask()
	j := s.finger & mask
	for s.slots[j] < 0 {
		j++
		if j > mask {
			j = 0
		}
	}
	k := s.slots[j]
	s.slots[j] = slotDummy
	s.used--
	s.finger = j + 1
	return k
}

// insertClean is set_insert_clean: k is known absent and the table has no
// dummies, so it takes the first empty slot of its probe sequence.
func insertClean(slots []int32, hs []uint64, k int32) {
	h := hs[k]
	mask := uint64(len(slots) - 1)
	perturb := h
	i := h & mask
	for {
		if slots[i] == slotEmpty {
			slots[i] = k
			return
		}
		if i+linearProbes <= mask {
			for j := i + 1; j <= i+linearProbes; j++ {
				if slots[j] == slotEmpty {
					slots[j] = k
					return
				}
			}
		}
		perturb >>= perturbShift
		i = (i*5 + 1 + perturb) & mask
	}
}

// tableSize is the smallest power of two > minused, at least 8.
func tableSize(minused int) int {
	n := setMinSize
	for n <= minused {
		n <<= 1
	}
	return n
}

// resize is set_table_resize: reinsert the active keys, in slot order, into
// a table of tableSize(minused) slots. A minimal table without dummies is
// left alone.
func (s *pySet) resize(hs []uint64, minused int) {
	n := tableSize(minused)
	if n == setMinSize && len(s.slots) == setMinSize && s.fill == s.used {
		return
	}
	old := s.slots
	var slots []int32
	if s.recycle && cap(s.spare) >= n {
		slots = s.spare[:n]
	} else {
		slots = make([]int32, n)
	}
	for i := range slots {
		slots[i] = slotEmpty
	}
	for _, k := range old {
		if k >= 0 {
			insertClean(slots, hs, k)
		}
	}
	if s.recycle {
		s.spare = old
	}
	s.slots = slots
	s.fill = s.used
}

// mergeSet is set_merge(s, other): one resize up front, then a slot-for-slot
// copy when s is empty and the tables match in size and other has no
// dummies, else set_insert_clean into an empty s, else plain adds.
func (s *pySet) mergeSet(hs []uint64, other *pySet) {
	if other == s || other.used == 0 {
		return
	}
	if (s.fill+other.used)*5 >= s.mask()*3 {
		s.resize(hs, (s.used+other.used)*2)
	}
	switch {
	case s.fill == 0 && s.mask() == other.mask() && other.fill == other.used:
		copy(s.slots, other.slots)
		s.fill, s.used = other.fill, other.used
	case s.fill == 0:
		s.fill, s.used = other.used, other.used
		for _, k := range other.slots {
			if k >= 0 {
				insertClean(s.slots, hs, k)
			}
		}
	default:
		for _, k := range other.slots {
			if k >= 0 {
				s.add(hs, k)
			}
		}
	}
}

// frozenView is a stored frozenset seen as its members in slot order, each
// with its slot index: all set_merge needs from a source table, in a fraction
// of the table's memory (the graph's dependency frozensets are stored so).
type frozenView struct {
	keys  []int32
	pos   []int32
	mask  int
	dirty bool // the table holds dummies (fill != used)
}

// view captures s's current table as a frozenView (allocating).
func (s *pySet) view() frozenView {
	v := frozenView{mask: s.mask(), dirty: s.fill != s.used}
	for i, k := range s.slots {
		if k >= 0 {
			v.keys = append(v.keys, k)
			v.pos = append(v.pos, int32(i))
		}
	}
	return v
}

// mergeFrozen is set_merge(s, other) for a stored frozenset.
func (s *pySet) mergeFrozen(hs []uint64, other frozenView) {
	n := len(other.keys)
	if n == 0 {
		return
	}
	if (s.fill+n)*5 >= s.mask()*3 {
		s.resize(hs, (s.used+n)*2)
	}
	switch {
	case s.fill == 0 && s.mask() == other.mask && !other.dirty:
		for i, k := range other.keys {
			s.slots[other.pos[i]] = k
		}
		s.fill, s.used = n, n
	case s.fill == 0:
		s.fill, s.used = n, n
		for _, k := range other.keys {
			insertClean(s.slots, hs, k)
		}
	default:
		for _, k := range other.keys {
			s.add(hs, k)
		}
	}
}

// difference is set_difference(src, other) written into dst (cleared first),
// where other is a set or dict known by membership and size. When src is
// more than four times larger than other, CPython copies src and discards
// (set_copy_and_difference, whose discards may leave dummies or trigger a
// shrinking resize); otherwise it adds the survivors, in src's slot order,
// to a new table. The two give different layouts, hence both are kept.
func difference(hs []uint64, dst *pySet, src frozenView, other []bool, otherSize int) {
	dst.clear()
	if len(src.keys)>>2 > otherSize {
		dst.mergeFrozen(hs, src)
		for _, k := range src.keys {
			if other[k] {
				dst.discard(hs, k)
			}
		}
		dst.shrinkAfterDiscards(hs)
		return
	}
	for _, k := range src.keys {
		if !other[k] {
			dst.add(hs, k)
		}
	}
}

// shrinkAfterDiscards is the tail of set_difference_update_internal: a table
// more than a quarter dummies is rebuilt.
func (s *pySet) shrinkAfterDiscards(hs []uint64) {
	if s.fill-s.used <= s.mask()/4 {
		return
	}
	s.resize(hs, s.growTarget())
}

// intersection is set_intersection(a, b) for two sets: it walks the smaller
// (b when the sizes are equal) and adds the members the other one holds.
func intersection(hs []uint64, dst *pySet, a, b *pySet) {
	dst.clear()
	if a == b {
		dst.mergeSet(hs, a)
		return
	}
	so, other := a, b
	if other.used > so.used {
		so, other = other, so
	}
	for _, k := range other.slots {
		if k >= 0 && so.contains(hs, k) {
			dst.add(hs, k)
		}
	}
}

// isSubset is set_issubset(a, b).
func isSubset(hs []uint64, a, b *pySet) bool {
	if a.used > b.used {
		return false
	}
	for _, k := range a.slots {
		if k >= 0 && !b.contains(hs, k) {
			return false
		}
	}
	return true
}

// setSlab hands out empty sets carved from shared chunks: dask.order makes
// a set per leaf degree it meets (half a million for a million-task
// reduction tree), and one allocation each would dominate. Sets are
// referred to by index. A pointer from get is valid until the next alloc:
// the first chunk starts at the graph's size (sizeFor; a graph has no more
// leaf degrees than nodes) and is moved into a whole chunk if it fills. A
// whole chunk is 110 KB with its tables, and a 10-task graph, a small
// computation's, zeroed one on every update-graph.
type setSlab struct {
	chunks [][]pySet
	tables []int32 // the current chunk's 8-slot tables
	n      int32
	first  int32 // the first chunk's length, slabChunk when unsized
}

const slabChunk = 1024

// sizeFor sizes the first chunk for a graph of n nodes; call it before alloc.
func (sl *setSlab) sizeFor(n int) { sl.first = int32(min(max(n, 8), slabChunk)) }

// alloc returns the index of a new empty set.
func (sl *setSlab) alloc() int32 {
	i := int(sl.n) % slabChunk
	switch {
	case i == 0:
		size := slabChunk
		if sl.n == 0 && sl.first > 0 {
			size = int(sl.first)
		}
		sl.chunks = append(sl.chunks, make([]pySet, size))
		sl.tables = newSetTables(size)
	case sl.n < slabChunk && i == len(sl.chunks[0]): // the first chunk, sized small, is full
		whole := make([]pySet, slabChunk)
		copy(whole, sl.chunks[0])
		sl.chunks[0] = whole
		sl.tables = newSetTables(slabChunk) // the copied sets keep their slots in the old tables
	}
	s := &sl.chunks[sl.n/slabChunk][i]
	s.slots = sl.tables[i*setMinSize : (i+1)*setMinSize : (i+1)*setMinSize]
	sl.n++
	return sl.n - 1
}

func newSetTables(sets int) []int32 {
	t := make([]int32, sets*setMinSize)
	for j := range t {
		t[j] = slotEmpty
	}
	return t
}

func (sl *setSlab) get(i int32) *pySet { return &sl.chunks[i/slabChunk][i%slabChunk] }
