package scheduler

import (
	"fmt"
	"slices"

	"daskgo/protocol"
)

// tableSegment holds, for State.tasks, the tasks one big graph created,
// found through the key index the graph's GraphKeys hold anyway
// (GraphKeys.index). Adopting it instead of putting each new task in the
// slots saves, per task of a big graph, an insert and a delete in a table
// of a million slots, each a cache miss (about a tenth of the engine's CPU
// per task on the 1M-task tree, in the simulator's profile).
//
// Invariants: own[i] is the task created for entry i of the graph while it
// is held, else nil; such a task has seg == this segment and segPos == i.
// A key is held in at most one place: the slots or one segment.
type tableSegment struct {
	index keyIndex
	own   []*TaskState
	live  int
}

const (
	// segmentMin is the smallest graph whose new tasks go to a segment;
	// smaller ones go to the slots, so that lookups do not probe one
	// index per small graph.
	segmentMin = 4096
	// segmentsMax bounds the probes of a lookup: adopting one more folds
	// the emptiest into the slots.
	segmentsMax = 4
)

// adoptSegment starts a segment over the graph entries indexed by index;
// n is the number of entries. The tasks enter it one by one (adopt).
func (t *taskTable) adoptSegment(index keyIndex, n int) *tableSegment {
	if len(t.segs) >= segmentsMax {
		least := 0
		for i, sg := range t.segs {
			if sg.live < t.segs[least].live {
				least = i
			}
		}
		t.fold(least)
	}
	sg := &tableSegment{index: index, own: make([]*TaskState, n)}
	t.segs = append(t.segs, sg)
	return sg
}

// adopt holds ts, which no place holds yet, as the task of entry i of sg.
func (t *taskTable) adopt(sg *tableSegment, i int32, ts *TaskState) {
	sg.own[i] = ts
	ts.seg, ts.segPos = sg, i
	sg.live++
	t.segLive++
	t.peak = max(t.peak, t.Len())
}

// settle ends sg's adoption: a segment that adopted no task is dropped and
// one that adopted under a quarter of its entries (the graph's other keys
// were held already) is folded into the slots, as segRemove would.
func (t *taskTable) settle(sg *tableSegment) {
	for i, x := range t.segs {
		if x != sg {
			continue
		}
		if sg.live == 0 || sg.live*4 < len(sg.own) {
			t.fold(i)
		}
		return
	}
}

// segGet returns the task of k held by a segment, or nil; h is
// keyIndexHash(k). An entry whose task is gone cannot be compared (the
// index holds no key), so the probe goes on past it: at worst to the end
// of the run.
func (t *taskTable) segGet(k protocol.Key, h uint64) *TaskState {
	for _, sg := range t.segs {
		for it := sg.index.probe(h); ; {
			e, ok := it.next()
			if !ok {
				break
			}
			if ts := sg.own[e]; ts != nil && ts.Key == k {
				return ts
			}
		}
	}
	return nil
}

// segRemove drops ts from its segment. A segment left empty is dropped; one
// left at under a quarter of its entries is folded into the slots, so that
// its 24 bytes per entry (index and own) stay within four times the live
// tasks' (amortized: a fold moves at most a third as many tasks as were
// removed since the segment began).
func (t *taskTable) segRemove(ts *TaskState) {
	sg := ts.seg
	sg.own[ts.segPos] = nil
	ts.seg, ts.segPos = nil, 0
	sg.live--
	t.segLive--
	t.settle(sg)
}

// fold moves the tasks of segment i into the slots and drops it
// (slices.Delete clears the vacated end of segs, which would otherwise keep
// the last segment's index and own reachable).
func (t *taskTable) fold(i int) {
	sg := t.segs[i]
	t.segs = slices.Delete(t.segs, i, i+1)
	for _, ts := range sg.own {
		if ts != nil {
			ts.seg, ts.segPos = nil, 0
			t.segLive--
			t.putSlots(ts, keyIndexHash(ts.Key))
		}
	}
}

// checkSegments reports the first broken segment invariant, with the task
// concerned when there is one: a held entry that names another place, a
// live count that is off, a segment under a quarter full (or empty, which
// settle and segRemove never leave), more than segmentsMax segments, live
// counts that do not add up, a dropped segment still referenced past the
// end of segs. validateState and the table's tests both run it.
func (t *taskTable) checkSegments() (*TaskState, error) {
	if len(t.segs) > segmentsMax {
		return nil, fmt.Errorf("%d task table segments, at most %d", len(t.segs), segmentsMax)
	}
	for _, sg := range t.segs[len(t.segs):cap(t.segs)] {
		if sg != nil {
			return nil, fmt.Errorf("a dropped task table segment is still referenced past the end of segs")
		}
	}
	live := 0
	for _, sg := range t.segs {
		n := 0
		for i, ts := range sg.own {
			if ts == nil {
				continue
			}
			n++
			if ts.seg != sg || ts.segPos != int32(i) {
				return ts, fmt.Errorf("held by entry %d of a task table segment that it does not name", i)
			}
		}
		if n != sg.live || n == 0 || n*4 < len(sg.own) {
			return nil, fmt.Errorf("task table segment of %d entries holds %d tasks and counts %d", len(sg.own), n, sg.live)
		}
		live += n
	}
	if live != t.segLive {
		return nil, fmt.Errorf("task table segments hold %d tasks and count %d", live, t.segLive)
	}
	return nil, nil
}
