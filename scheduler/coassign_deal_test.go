package scheduler

import (
	"fmt"
	"testing"
)

// pairs returns roots x-0..x-(2n-1), each consecutive pair combined by its
// own task p-i: n families of two, in priority order (submit numbers
// tasks by position).
func pairs(n int) ([]GraphTask, []string) {
	var g []GraphTask
	var ps []string
	for i := 0; i < n; i++ {
		a, b := fmt.Sprintf("x-%d", 2*i), fmt.Sprintf("x-%d", 2*i+1)
		p := fmt.Sprintf("p-%d", i)
		g = append(g, task(a), task(b), task(p, a, b))
		ps = append(ps, p)
	}
	return g, ps
}

func TestCoDealSpreadsFamiliesOverThePriorityRange(t *testing.T) {
	// 32 pairs on 4 workers: each pair stays whole, and the 4 most urgent
	// pairs go to 4 different workers (a contiguous cut would give them
	// all to the first), so the workers walk the priority range together
	sm := newSim(t, modes[2], "x", "w1:1", "w2:1", "w3:1", "w4:1")
	g, ps := pairs(32)
	sm.record(sm.submit("c1", g, ps...))
	owner := sm.ownerOf()
	eq(t, len(owner), 64, "every root owned or sent")
	first := map[string]bool{}
	for i := 0; i < 32; i++ {
		if owner[2*i] != owner[2*i+1] {
			t.Fatalf("pair %d split: %s and %s", i, owner[2*i], owner[2*i+1])
		}
		if i < 4 {
			first[owner[2*i]] = true
		}
	}
	eq(t, len(first), 4, "workers owning the 4 most urgent pairs")
	sm.drain("w1", "w2", "w3", "w4")
	for _, p := range ps {
		sm.wantStatus(p, "memory")
	}
}

// stencil returns a rows × cols grid of roots x-(i*cols+j) in row-major
// priority, each with a halo task h-i-j, and one task per cell taking the
// cell and its 8 neighbours' halos (map_overlap's shape).
func stencil(rows, cols int) ([]GraphTask, []string) {
	var g []GraphTask
	id := func(i, j int) string { return fmt.Sprintf("x-%d", i*cols+j) }
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			g = append(g, task(id(i, j)), task(fmt.Sprintf("h-%d-%d", i, j), id(i, j)))
		}
	}
	var cs []string
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			deps := []string{id(i, j)}
			for di := -1; di <= 1; di++ {
				for dj := -1; dj <= 1; dj++ {
					a, b := i+di, j+dj
					if (di != 0 || dj != 0) && a >= 0 && b >= 0 && a < rows && b < cols {
						deps = append(deps, fmt.Sprintf("h-%d-%d", a, b))
					}
				}
			}
			c := fmt.Sprintf("c-%d-%d", i, j)
			g = append(g, task(c, deps...))
			cs = append(cs, c)
		}
	}
	return g, cs
}

func TestCoMeshIsDealtInSmallFamilies(t *testing.T) {
	// a 24 × 24 stencil on 4 workers: limit-sized families would be bands
	// of 6 rows, one per worker (four fronts); a mesh gets families of
	// coMeshFamily, so every worker owns cells in the first three rows
	sm := newSim(t, modes[2], "x", "w1:1", "w2:1", "w3:1", "w4:1")
	g, cs := stencil(24, 24)
	sm.record(sm.submit("c1", g, cs...))
	owner := sm.ownerOf()
	inFirstRows := map[string]int{}
	for i := 0; i < 72; i++ {
		inFirstRows[owner[i]]++
	}
	eq(t, len(inFirstRows), 4, "workers owning cells of the first three rows")
	for w, n := range inFirstRows {
		if n > 2*coMeshFamily {
			t.Fatalf("%s owns %d of the first 72 cells: more than two families", w, n)
		}
	}
	sm.drain("w1", "w2", "w3", "w4")
	for _, c := range cs {
		sm.wantStatus(c, "memory")
	}
}
