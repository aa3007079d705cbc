package order

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
)

// setOp is one line of testdata/gen_setops.py's output.
type setOp struct {
	Op     string          `json:"op"`
	A      int             `json:"a"`
	B      int             `json:"b"`
	Dst    *int            `json:"dst"`
	Key    int32           `json:"key"`
	Keys   []int32         `json:"keys"`
	Ret    json.RawMessage `json:"ret"`
	Len    int             `json:"len"`
	Digest string          `json:"digest"`
	List   []int32         `json:"list"`
}

// setRegister is a Python variable holding a set or frozenset; frozen ones
// may share one object, as frozenset(f) and f.copy() return f itself.
type setRegister struct {
	s      *pySet
	frozen bool
}

// TestSetMatchesCPython replays random set and frozenset operations that
// the real interpreter ran (tiny pools full of collisions and dummies, int,
// str, tuple, float and non-ASCII keys, tables past 50000 keys) and requires
// the same iteration order after every operation.
func TestSetMatchesCPython(t *testing.T) {
	t.Parallel()
	out := runTestdataPython(t, "gen_setops.py")
	lines := jsonLines[json.RawMessage](t, out)
	var head struct {
		Keys []testKey `json:"keys"`
	}
	if err := json.Unmarshal(lines[0], &head); err != nil {
		t.Fatal(err)
	}
	hs := make([]uint64, len(head.Keys))
	var kh keyHasher
	for i, k := range head.Keys {
		h, err := kh.hash(k.key(t))
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	r := &setReplay{t: t, hs: hs, regs: map[int]*setRegister{}, member: make([]bool, len(hs))}
	counts := map[string]int{}
	for n, raw := range lines[1:] {
		var op setOp
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Fatal(err)
		}
		if err := r.apply(op); err != nil {
			t.Fatalf("operation %d (%s): %v", n+1, raw, err)
		}
		counts[op.Op]++
	}
	t.Logf("%d keys, %d operations replayed with 0 mismatches: %v", len(hs), len(lines)-1, counts)
}

type setReplay struct {
	t      *testing.T
	hs     []uint64
	regs   map[int]*setRegister
	member []bool // scratch membership of a difference's other operand
}

func (r *setReplay) apply(op setOp) error {
	hs := r.hs
	a, b := r.regs[op.A], r.regs[op.B]
	switch op.Op {
	case "add", "discard", "bulkadd", "bulkdiscard", "pop", "update":
		a = r.regs[*op.Dst] // in-place operations name their set as dst
	}
	var dst *setRegister
	switch op.Op {
	case "new":
		dst = &setRegister{s: newPySet()}
	case "add":
		a.s.add(hs, op.Key)
	case "discard":
		a.s.discard(hs, op.Key)
	case "bulkadd":
		for _, k := range op.Keys {
			a.s.add(hs, k)
		}
	case "bulkdiscard":
		for _, k := range op.Keys {
			a.s.discard(hs, k)
		}
	case "pop":
		want, _ := strconv.Atoi(string(op.Ret))
		if got := a.s.pop(); int(got) != want {
			return fmt.Errorf("pop() = %d, CPython popped %d", got, want)
		}
	case "copy", "frozen":
		if a.frozen {
			dst = a
			break
		}
		dst = &setRegister{s: newPySet(), frozen: op.Op == "frozen"}
		dst.s.mergeSet(hs, a.s)
	case "set":
		dst = &setRegister{s: newPySet()}
		dst.s.mergeSet(hs, a.s)
	case "display": // Task.__init__: {first}, .add(rest...), frozenset()
		s := newPySet()
		for _, k := range op.Keys {
			s.add(hs, k)
		}
		dst = &setRegister{s: newPySet(), frozen: true}
		dst.s.mergeSet(hs, s)
	case "diff":
		dst = &setRegister{s: newPySet(), frozen: a.frozen}
		members := b.s.appendTo(nil)
		r.diff(dst.s, a.s, members, b.s.len())
	case "diffdict":
		dst = &setRegister{s: newPySet(), frozen: a.frozen}
		distinct := 0
		seen := map[int32]bool{}
		for _, k := range op.Keys {
			if !seen[k] {
				seen[k] = true
				distinct++
			}
		}
		r.diff(dst.s, a.s, op.Keys, distinct)
	case "and":
		dst = &setRegister{s: newPySet(), frozen: a.frozen}
		intersection(hs, dst.s, a.s, b.s)
	case "update":
		a.s.mergeSet(hs, b.s)
	case "issubset":
		want := string(op.Ret) == "true"
		if got := isSubset(hs, a.s, b.s); got != want {
			return fmt.Errorf("issubset = %v, CPython says %v", got, want)
		}
		return nil
	default:
		return fmt.Errorf("unknown op %q", op.Op)
	}
	if op.Dst == nil {
		return nil
	}
	if dst != nil {
		r.regs[*op.Dst] = dst
	}
	return r.check(r.regs[*op.Dst].s, op)
}

// diff runs difference() with other given by its members; the source goes
// through a frozenView, the form the graph's dependency sets are stored in.
func (r *setReplay) diff(dst, src *pySet, other []int32, otherSize int) {
	for _, k := range other {
		r.member[k] = true
	}
	difference(r.hs, dst, src.view(), r.member, otherSize)
	for _, k := range other {
		r.member[k] = false
	}
}

func (r *setReplay) check(s *pySet, op setOp) error {
	got := s.appendTo(nil)
	if len(got) != op.Len || s.len() != op.Len {
		return fmt.Errorf("len %d (%d listed), CPython %d", s.len(), len(got), op.Len)
	}
	h := uint64(14695981039346656037)
	for _, k := range got {
		h = (h ^ uint64(k)) * 1099511628211
	}
	if strconv.FormatUint(h, 10) != op.Digest {
		if op.List != nil {
			return fmt.Errorf("iteration order\n  go:      %v\n  CPython: %v", got, op.List)
		}
		return fmt.Errorf("iteration order of %d keys differs (digest)", len(got))
	}
	return nil
}

// A slab sized for a small graph that is asked for more sets than that
// (past its first chunk and past a whole one) hands out sets that are
// empty, distinct and keep what was added to them.
func TestSetSlabGrowsPastItsFirstChunk(t *testing.T) {
	const sets = 2*slabChunk + 5
	hs := make([]uint64, sets)
	for i := range hs {
		hs[i] = uint64(i)*0x9E3779B97F4A7C15 + 1
	}
	var sl setSlab
	sl.sizeFor(10)
	for i := range int32(sets) {
		if got := sl.alloc(); got != i {
			t.Fatalf("alloc %d returned %d", i, got)
		}
		s := sl.get(i)
		if s.len() != 0 {
			t.Fatalf("set %d is not empty: %v", i, s.appendTo(nil))
		}
		s.add(hs, i)
	}
	for i := range int32(sets) {
		if got := sl.get(i).appendTo(nil); len(got) != 1 || got[0] != i {
			t.Fatalf("set %d holds %v, want [%d]", i, got, i)
		}
	}
}
