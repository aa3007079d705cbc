package server

import (
	"context"
	"fmt"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// benchmarkHardware is Scheduler.benchmark_hardware (Client.
// benchmark_hardware): every worker's benchmark_disk, then every worker's
// benchmark_memory, then benchmark_network between the workers paired at
// random (an odd one out sits out, as toolz.partition drops it); each
// size's durations averaged over the workers, {"disk": {size: seconds},
// "memory": {...}, "network": {...}}. A worker that fails fails the call,
// as distributed's broadcast and gather raise.
func (s *Server) benchmarkHardware(ctx context.Context, _ *comm.Request) (any, error) {
	var workers []string
	if err := s.loop.query(ctx, func(st *scheduler.State) { workers = st.WorkerAddresses() }); err != nil {
		return nil, err
	}
	out := protocol.NewMap()
	for _, mode := range []string{"disk", "memory"} {
		results := s.callEach(ctx, sameMsg(workers, protocol.NewMap("op", "benchmark_"+mode)))
		avg, err := averageDurations(results)
		if err != nil {
			return nil, fmt.Errorf("benchmark_%s: %w", mode, err)
		}
		out.Set(mode, avg)
	}
	for i := len(workers) - 1; i > 0; i-- { // random.shuffle
		j := s.randIntn(i + 1)
		workers[i], workers[j] = workers[j], workers[i]
	}
	pairs := map[string]*protocol.Map{}
	for i := 0; i+1 < len(workers); i += 2 {
		pairs[workers[i]] = protocol.NewMap("op", "benchmark_network", "address", workers[i+1])
	}
	avg, err := averageDurations(s.callEach(ctx, pairs))
	if err != nil {
		return nil, fmt.Errorf("benchmark_network: %w", err)
	}
	out.Set("network", avg)
	return out, nil
}

// averageDurations averages each size's figure over the workers' replies
// ({size: seconds}), sizes in the order first seen.
func averageDurations(results []callResult) (*protocol.Map, error) {
	sums := &protocol.Map{}
	counts := map[string]int{}
	for _, r := range results {
		if r.err != nil {
			return nil, fmt.Errorf("%s: %w", r.worker, r.err)
		}
		m, ok := r.reply.(*protocol.Map)
		if !ok {
			return nil, fmt.Errorf("%s answered %s, not a dict", r.worker, protocol.String(r.reply))
		}
		for _, e := range m.Items() {
			size, ok1 := e.Key.(string)
			d, ok2 := toFloat(e.Value)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("%s answered %s, not {size: duration}", r.worker, protocol.String(r.reply))
			}
			prev, _ := sums.Get(size).(float64)
			sums.Set(size, prev+d)
			counts[size]++
		}
	}
	for i, e := range sums.Entries {
		sums.Entries[i].Value = e.Value.(float64) / float64(counts[e.Key.(string)])
	}
	return sums, nil
}
