package scheduler

import "slices"

// oset is an insertion-ordered set with swap-remove. The engine iterates its
// sets to build messages and recommendations, and Go map order is random, so
// plain maps would make the outbox differ between runs; oset keeps every run
// of the same stimuli byte-identical (raft-style determinism). Small sets
// (the common case: dependencies, replicas) are scanned linearly; an index
// map is built only once a set grows past osetLinear, so a 10k-way fan-in
// still removes in O(1).
//
// A TaskState holds six task sets and most hold one item or none
// (who_has, who_wants, a lone dependent), so an oset is two words: the one
// item inline, and the storage of a set that has held two (or a zero
// value, which the inline slot cannot tell from empty) behind a pointer. A
// 40-byte oset (slice, index, inline item) made the TaskState 504 bytes, in
// the 512-byte size class; this one made it 360, in the 384-byte class.
// The simulator's 1M-task tree on 1,000 workers peaked at 1.29 GB of RSS
// instead of 1.46. A task's dependencies and waiting_on, often two, are
// oset2s, with two items inline (oset2.go); both share the spilled
// storage's code below (osetItems).
//
// Invariant: rest == nil and one[0] is the only item, or there is none when
// one[0] is the zero value; or rest != nil, holds every item, and one[0] is
// zero. An oset must never be copied by value once it holds items.
type oset[T comparable] struct {
	one  [1]T
	rest *osetItems[T]
}

// osetItems is a set's storage once it held two items, with room inline
// for the first few so that going from one item to two is one allocation.
type osetItems[T comparable] struct {
	items []T
	idx   map[T]int32
	small [4]T
}

const osetLinear = 16

func (s *oset[T]) Len() int {
	if s.rest != nil {
		return len(s.rest.items)
	}
	var zero T
	if s.one[0] != zero {
		return 1
	}
	return 0
}

// Items is the backing slice: read-only, and invalid after a mutation.
func (s *oset[T]) Items() []T {
	if s.rest != nil {
		return s.rest.items
	}
	var zero T
	if s.one[0] != zero {
		return s.one[:]
	}
	return nil
}

func (s *oset[T]) find(v T) int {
	if r := s.rest; r != nil {
		return r.find(v)
	}
	var zero T
	if v == s.one[0] && v != zero {
		return 0
	}
	return -1
}

func (s *oset[T]) Has(v T) bool { return s.find(v) >= 0 }

// Add inserts v and reports whether it was new.
func (s *oset[T]) Add(v T) bool {
	if s.find(v) >= 0 {
		return false
	}
	s.addNew(v)
	return true
}

// addNew appends v, which the caller knows is absent (a symmetric set
// said so): it skips Add's lookup, a hash probe on big sets.
func (s *oset[T]) addNew(v T) {
	if s.rest == nil {
		var zero T
		if s.one[0] == zero && v != zero {
			s.one[0] = v
			return
		}
		s.rest = spill(s.one[:]) // leaving the inline slot: it keeps nothing
	}
	s.rest.add(v)
}

// Remove deletes v (moving the last item into its place) and reports
// whether it was present.
func (s *oset[T]) Remove(v T) bool {
	i := s.find(v)
	if i < 0 {
		return false
	}
	if s.rest == nil {
		var zero T
		s.one[0] = zero
		return true
	}
	s.rest.removeAt(i, v)
	return true
}

// spill moves the items held inline (a prefix of inline up to its first
// zero value) into new storage, in order, and zeroes inline.
func spill[T comparable](inline []T) *osetItems[T] {
	r := &osetItems[T]{}
	r.items = r.small[:0]
	var zero T
	for i, x := range inline {
		if x == zero {
			break
		}
		r.items = append(r.items, x)
		inline[i] = zero
	}
	return r
}

func (r *osetItems[T]) find(v T) int {
	if r.idx != nil {
		if i, ok := r.idx[v]; ok {
			return int(i)
		}
		return -1
	}
	for i, x := range r.items {
		if x == v {
			return i
		}
	}
	return -1
}

// add appends v, absent, indexing the set once it outgrows osetLinear.
func (r *osetItems[T]) add(v T) {
	r.items = appendDoubling(r.items, v)
	if r.idx != nil {
		r.idx[v] = int32(len(r.items) - 1)
	} else if len(r.items) > osetLinear {
		r.buildIndex(2 * len(r.items))
	}
}

func (r *osetItems[T]) buildIndex(size int) {
	r.idx = make(map[T]int32, size)
	for i, x := range r.items {
		r.idx[x] = int32(i)
	}
}

// removeAt deletes v, at position i, moving the last item into its place.
func (r *osetItems[T]) removeAt(i int, v T) {
	var zero T
	last := len(r.items) - 1
	if i != last {
		r.items[i] = r.items[last]
		if r.idx != nil {
			r.idx[r.items[i]] = int32(i)
		}
	}
	r.items[last] = zero
	r.items = r.items[:last]
	if r.idx != nil {
		delete(r.idx, v)
	}
}

// Clear empties the set, releasing its memory.
func (s *oset[T]) Clear() {
	var zero T
	s.one[0] = zero
	s.rest = nil
}

// reset empties the set but keeps its storage, for a reused scratch set.
func (s *oset[T]) reset() {
	var zero T
	s.one[0] = zero
	if r := s.rest; r != nil {
		clear(r.items)
		r.items = r.items[:0]
		if r.idx != nil {
			clear(r.idx)
		}
	}
}

// Snapshot copies the items, for loops that mutate the set.
func (s *oset[T]) Snapshot() []T {
	items := s.Items()
	if len(items) == 0 {
		return nil
	}
	return append([]T(nil), items...)
}

// appendDoubling is append with a capacity that doubles: append grows big
// slices by 1.25x, re-copying every element about five times over while a
// 100k-item set (a client's wants_what, the queue) fills up.
func appendDoubling[T any](s []T, v T) []T {
	if len(s) == cap(s) && len(s) >= 256 {
		s = slices.Grow(s, len(s))
	}
	return append(s, v)
}
