package sim

import (
	"sort"

	"daskgo/scheduler"
)

// PeakTrace is what the cluster held at (within 1 % of) its peak memory:
// the evidence for why one mode peaks higher than another, e.g. which task
// prefixes piled up and whether the bytes are first copies or replicas
// fetched for dependents.
type PeakTrace struct {
	TimeS          float64      `json:"time_s"`
	TotalBytes     int64        `json:"total_bytes"`
	TransientBytes int64        `json:"transient_bytes"` // working memory of executing tasks
	ReplicaBytes   int64        `json:"replica_bytes"`   // second and later copies of a key
	ByPrefix       []PrefixHeld `json:"by_prefix"`       // largest first
	PerWorker      []int64      `json:"per_worker_bytes"`
}

// PrefixHeld is the data of one task prefix held across the cluster.
type PrefixHeld struct {
	Prefix string `json:"prefix"`
	Keys   int    `json:"keys"`
	Bytes  int64  `json:"bytes"`
}

// tracePeak snapshots the cluster when memory first exceeds the last
// snapshot by 1 %: at most a few hundred snapshots per run, each
// O(held keys), so traced runs of big graphs stay fast.
func (s *Sim) tracePeak() {
	if s.trace != nil && s.clusterMem < s.trace.TotalBytes+s.trace.TotalBytes/100 {
		return
	}
	t := &PeakTrace{TimeS: s.clk.now, TotalBytes: s.clusterMem, PerWorker: make([]int64, len(s.workers))}
	held := map[string]*PrefixHeld{}
	copies := map[int32]int{}
	for i, w := range s.workers {
		t.PerWorker[i] = w.mem
		var data int64
		for k, nb := range w.keys.data {
			if w.keys.spilled[k] {
				continue
			}
			data += nb
			if copies[k]++; copies[k] > 1 {
				t.ReplicaBytes += nb
			}
			p := s.prefixOf(k)
			h := held[p]
			if h == nil {
				h = &PrefixHeld{Prefix: p}
				held[p] = h
			}
			h.Keys++
			h.Bytes += nb
		}
		t.TransientBytes += w.mem - data
	}
	for _, h := range held {
		t.ByPrefix = append(t.ByPrefix, *h)
	}
	sort.Slice(t.ByPrefix, func(i, j int) bool {
		a, b := t.ByPrefix[i], t.ByPrefix[j]
		return a.Bytes > b.Bytes || a.Bytes == b.Bytes && a.Prefix < b.Prefix
	})
	s.trace = t
}

func (s *Sim) prefixOf(t int32) string {
	if s.prefixes == nil {
		s.prefixes = map[int32]string{}
	}
	p, ok := s.prefixes[t]
	if !ok {
		p = scheduler.KeyPrefix(s.g.Tasks[t].Key)
		s.prefixes[t] = p
	}
	return p
}
