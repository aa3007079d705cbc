package scheduler

import (
	"slices"
	"testing"
)

// stringSet is what TestOsetMatchesAReferenceList drives: oset and oset2.
type stringSet interface {
	Add(string) bool
	Remove(string) bool
	Has(string) bool
	Len() int
	Items() []string
	Snapshot() []string
	Clear()
}

// TestOsetMatchesAReferenceList runs random adds, removes, resets and
// clears against a plain list with oset's order (insertion order,
// swap-remove), through the inline items, the small storage, the index past
// osetLinear and back, with the zero value as a member too (a string set's
// "": the inline slots cannot hold it). oset2 must give the same order as
// oset at every step: the engine's decisions iterate these sets.
func TestOsetMatchesAReferenceList(t *testing.T) {
	t.Run("oset", func(t *testing.T) { checkSetAgainstList(t, &oset[string]{}) })
	t.Run("oset2", func(t *testing.T) { checkSetAgainstList(t, &oset2[string]{}) })
}

func checkSetAgainstList(t *testing.T, s stringSet) {
	next := xorshift(7)
	vals := []string{""}
	for i := range 40 {
		vals = append(vals, string(rune('a'+i%26))+string(rune('0'+i/26)))
	}
	var ref []string
	for step := range 50000 {
		// phases of mostly adds and mostly removes, so the set crosses
		// osetLinear both ways and empties now and then
		addBias := 6
		if step/500%2 == 1 {
			addBias = 3
		}
		v := vals[next(len(vals))]
		switch r := next(10); {
		case r < addBias:
			got := s.Add(v)
			want := !slices.Contains(ref, v)
			if want {
				ref = append(ref, v)
			}
			if got != want {
				t.Fatalf("step %d: Add(%q) = %v, want %v", step, v, got, want)
			}
		case r < 9:
			i := slices.Index(ref, v)
			if got := s.Remove(v); got != (i >= 0) {
				t.Fatalf("step %d: Remove(%q) = %v, want %v", step, v, got, i >= 0)
			}
			if i >= 0 {
				ref[i] = ref[len(ref)-1]
				ref = ref[:len(ref)-1]
			}
		case next(50) == 0:
			if o, ok := s.(*oset[string]); ok && next(2) == 0 {
				o.reset()
			} else {
				s.Clear()
			}
			ref = ref[:0]
		}
		if !slices.Equal(s.Items(), ref) { // nil and empty compare equal
			t.Fatalf("step %d: items %q, want %q", step, s.Items(), ref)
		}
		if s.Len() != len(ref) {
			t.Fatalf("step %d: Len %d, want %d", step, s.Len(), len(ref))
		}
		for _, x := range ref {
			if !s.Has(x) {
				t.Fatalf("step %d: %q missing", step, x)
			}
		}
		if snap := s.Snapshot(); !slices.Equal(snap, ref) {
			t.Fatalf("step %d: snapshot %q, want %q", step, snap, ref)
		}
	}
}

// The inline item is what keeps a TaskState in the 384-byte size class: a
// task with one dependent, one holder and one client allocates nothing for
// its sets.
func TestOsetOfOneItemAllocatesNothing(t *testing.T) {
	a, b := &TaskState{}, &TaskState{}
	var s oset[*TaskState]
	if n := testing.AllocsPerRun(100, func() { s.Add(a); s.Remove(a) }); n != 0 {
		t.Fatalf("adding and removing one item allocated %v times", n)
	}
	s.Add(a)
	s.Add(b)
	if items := s.Items(); len(items) != 2 || items[0] != a || items[1] != b {
		t.Fatalf("two items: %v", items)
	}
}

// Two items inline: a task on two inputs allocates nothing for its
// dependencies or waiting_on, and keeps their order.
func TestOset2OfTwoItemsAllocatesNothing(t *testing.T) {
	a, b := &TaskState{}, &TaskState{}
	var s oset2[*TaskState]
	if n := testing.AllocsPerRun(100, func() { s.Add(a); s.Add(b); s.Remove(a); s.Remove(b) }); n != 0 {
		t.Fatalf("adding and removing two items allocated %v times", n)
	}
	s.Add(a)
	s.Add(b)
	if items := s.Items(); len(items) != 2 || items[0] != a || items[1] != b || s.rest != nil {
		t.Fatalf("two items: %v, spilled %v", items, s.rest != nil)
	}
	s.Remove(a)
	if items := s.Items(); len(items) != 1 || items[0] != b {
		t.Fatalf("after removing the first of two: %v, want the second alone", items)
	}
}
