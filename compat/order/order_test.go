package order

import (
	"errors"
	"testing"

	"daskgo/protocol"
)

// graphOf builds a Graph of str keys from "key: dep dep ..." entries, in
// order; a key listed only as a dependency becomes external.
func graphOf(t testing.TB, tasks []string, dataNodes ...string) *Graph {
	t.Helper()
	g := &Graph{}
	index := map[string]int32{}
	var deps [][]string
	for _, line := range tasks {
		var name string
		var ds []string
		for i, f := range splitFields(line) {
			if i == 0 {
				name = f[:len(f)-1]
			} else {
				ds = append(ds, f)
			}
		}
		index[name] = int32(len(g.Keys))
		g.Keys = append(g.Keys, protocol.StrKey(name))
		deps = append(deps, ds)
		isTask := true
		for _, d := range dataNodes {
			if d == name {
				isTask = false
			}
		}
		g.IsTask = append(g.IsTask, isTask)
	}
	g.NumNodes = len(g.Keys)
	for _, ds := range deps {
		var ids []int32
		for _, d := range ds {
			id, ok := index[d]
			if !ok {
				id = int32(len(g.Keys))
				index[d] = id
				g.Keys = append(g.Keys, protocol.StrKey(d))
			}
			ids = append(ids, id)
		}
		g.Deps = append(g.Deps, ids)
	}
	return g
}

func splitFields(s string) []string {
	var out []string
	cur := ""
	for _, c := range s {
		if c == ' ' {
			if cur != "" {
				out = append(out, cur)
			}
			cur = ""
			continue
		}
		cur += string(c)
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// The docstring example of dask.order.order.
func TestOrderDocstringExample(t *testing.T) {
	g := graphOf(t, []string{"a:", "b:", "c: a", "d: b c"}, "a", "b")
	got, err := Order(g)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{0, 2, 1, 3} // {'a': 0, 'c': 1, 'b': 2, 'd': 3}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("priorities %v, want %v", got, want)
		}
	}
}

func TestOrderCycle(t *testing.T) {
	g := graphOf(t, []string{"x: z", "y: x", "z: y"})
	_, err := Order(g)
	var ce *CycleError
	if !errors.As(err, &ce) {
		t.Fatalf("want a CycleError, got %v", err)
	}
	t.Log(err)
}

func TestOrderEmpty(t *testing.T) {
	got, err := Order(&Graph{})
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v", got, err)
	}
}
