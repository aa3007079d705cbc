package server

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/scheduler"
)

// gather is Scheduler.gather: fetch keys from the workers that hold them
// (get_data, acknowledged with "OK"), retrying other holders when a worker
// fails, and report {"status":"error","keys":[...]} for what no holder had.
func (s *Server) gather(ctx context.Context, req *comm.Request) (any, error) {
	keys, err := protocol.KeysOf(req.Args.Get("keys"))
	if err != nil {
		return nil, fmt.Errorf("gather: %w", err)
	}
	ctx, stop := callerContext(ctx, req.Conn)
	defer stop()
	data := make(map[protocol.Key]any, len(keys))
	missing := keys
	var failed []protocol.Key
	badWorkers := map[string]bool{}
	for len(missing) > 0 {
		var picks []string
		if err := s.loop.query(ctx, func(st *scheduler.State) { picks = s.pickHolders(st, missing, badWorkers) }); err != nil {
			return nil, err
		}
		byWorker := map[string][]protocol.Key{}
		for i, k := range missing {
			if picks[i] == "" {
				failed = append(failed, k)
				continue
			}
			byWorker[picks[i]] = append(byWorker[picks[i]], k)
		}
		bad := s.getDataFromWorkers(ctx, byWorker, data)
		if err := context.Cause(ctx); err != nil {
			return nil, fmt.Errorf("gather: %w", err) // the caller left, or shutdown
		}
		missing = missing[:0:0]
		for w, ks := range byWorker {
			if bad[w] {
				badWorkers[w] = true
			}
			for _, k := range ks {
				if _, ok := data[k]; ok {
					continue
				}
				if bad[w] {
					missing = append(missing, k)
				} else {
					failed = append(failed, k)
				}
			}
		}
	}
	if len(failed) > 0 {
		req.Log.Warn().Int("keys", len(failed)).Msg("couldn't gather keys")
		return protocol.NewMap("status", "error", "keys", failed), nil
	}
	return protocol.NewMap("status", "OK", "data", data), nil
}

// pickHolders chooses, for each key, one of its holders at random among
// those not in bad ("" when none is left). It runs on the engine's
// goroutine (loop.query) and reads the holders in place (State.Holders).
func (s *Server) pickHolders(st *scheduler.State, keys []protocol.Key, bad map[string]bool) []string {
	picks := make([]string, len(keys))
	var buf []string
	for i, k := range keys {
		buf = st.Holders(k, buf)
		holders := usable(buf, bad)
		if len(holders) > 0 {
			picks[i] = holders[s.randIntn(len(holders))]
		}
	}
	return picks
}

// usable returns the holders not in bad, filtering holders in place.
func usable(holders []string, bad map[string]bool) []string {
	out := holders[:0]
	for _, h := range holders {
		if !bad[h] {
			out = append(out, h)
		}
	}
	return out
}

func (s *Server) randIntn(n int) int {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.IntN(n)
}

// getDataFromWorkers runs get_data on every worker concurrently, adds the
// values found to into and returns the workers that failed (connection
// errors).
func (s *Server) getDataFromWorkers(ctx context.Context, byWorker map[string][]protocol.Key, into map[protocol.Key]any) map[string]bool {
	var mu sync.Mutex
	bad := map[string]bool{}
	var wg sync.WaitGroup
	for w, keys := range byWorker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals, err := s.getData(ctx, w, keys)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.log.Warn().Err(err).Str("worker", w).Msg("get_data failed")
				bad[w] = true
				return
			}
			// as distributed's gather_from_workers: data.update(response["data"])
			for _, e := range vals.Items() {
				if k, err := protocol.KeyOf(e.Key); err == nil {
					into[k] = e.Value
				}
			}
		}()
	}
	wg.Wait()
	return bad
}

// getData is distributed's get_data_from_worker, including the "OK" the
// worker waits for and the retry after a "busy" answer.
func (s *Server) getData(ctx context.Context, worker string, keys []protocol.Key) (*protocol.Map, error) {
	for attempt := 0; ; attempt++ {
		var reply *protocol.Map
		err := s.pool.Do(ctx, worker, func(c *comm.Conn) error {
			v, err := c.Call(ctx, protocol.NewMap("op", "get_data", "keys", keys, "who", nil, "reply", true))
			if err != nil {
				return err
			}
			m, ok := v.(*protocol.Map)
			if !ok {
				return fmt.Errorf("get_data reply from %s is %s, not a dict", worker, protocol.String(v))
			}
			reply = m
			if m.Get("status") == "OK" {
				return c.Write("OK")
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		switch reply.Get("status") {
		case "OK":
			data, _ := reply.Get("data").(*protocol.Map)
			return data, nil
		case "busy":
			if attempt > 100 {
				return nil, fmt.Errorf("worker %s stayed busy", worker)
			}
			select {
			case <-s.clock.After(150 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		default:
			return nil, fmt.Errorf("get_data from %s: unexpected status %s", worker, protocol.String(reply.Get("status")))
		}
	}
}

// scatter is Scheduler.scatter: spread data round-robin over running
// workers with update_data, then register it for the client.
func (s *Server) scatter(ctx context.Context, req *comm.Request) (any, error) {
	data, ok := req.Args.Get("data").(*protocol.Map)
	if !ok {
		return nil, fmt.Errorf("scatter: data must be a dict")
	}
	client, _ := req.Args.Get("client").(string)
	broadcast, _ := req.Args.Get("broadcast").(bool)
	timeout := 2 * time.Second
	if t, ok := req.Args.Get("timeout").(int64); ok {
		timeout = time.Duration(t) * time.Second
	} else if t, ok := req.Args.Get("timeout").(float64); ok {
		timeout = time.Duration(t * float64(time.Second))
	}
	wanted := optionalStrings(req.Args.Get("workers"))
	workers, err := s.waitForRunningWorkers(ctx, wanted, timeout)
	if err != nil {
		return nil, err
	}
	keys := make([]protocol.Key, 0, data.Len())
	values := make([]any, 0, data.Len())
	for _, e := range data.Items() {
		k, err := protocol.KeyOf(e.Key)
		if err != nil {
			return nil, fmt.Errorf("scatter: %w", err)
		}
		keys = append(keys, k)
		values = append(values, e.Value)
	}
	perWorker := map[string]*protocol.Map{}
	whoHas := map[protocol.Key][]string{}
	s.mu.Lock()
	start := s.scatters
	s.scatters += uint64(len(keys))
	s.mu.Unlock()
	for i, k := range keys {
		targets := workers
		if !broadcast {
			targets = []string{workers[(start+uint64(i))%uint64(len(workers))]}
		}
		for _, w := range targets {
			if perWorker[w] == nil {
				perWorker[w] = &protocol.Map{}
			}
			perWorker[w].Entries = append(perWorker[w].Entries, protocol.Entry{Key: k, Value: values[i]})
			whoHas[k] = append(whoHas[k], w)
		}
	}
	nbytes, err := s.updateDataOnWorkers(ctx, perWorker)
	if err != nil {
		return nil, err
	}
	_, err = s.loop.call(ctx, func(id int64) scheduler.Stimulus {
		return &scheduler.UpdateData{Base: s.base("scatter"), Client: client, WhoHas: whoHas, NBytes: nbytes, ReplyTo: id}
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

func (s *Server) waitForRunningWorkers(ctx context.Context, wanted []string, timeout time.Duration) ([]string, error) {
	deadline := s.clock.Now().Add(timeout)
	for {
		var running []string
		if err := s.loop.query(ctx, func(st *scheduler.State) { running = st.RunningWorkers() }); err != nil {
			return nil, err
		}
		if len(wanted) > 0 {
			ok := map[string]bool{}
			for _, w := range running {
				ok[w] = true
			}
			running = running[:0:0]
			for _, w := range wanted {
				if ok[w] {
					running = append(running, w)
				}
			}
		}
		sort.Strings(running)
		if len(running) > 0 {
			return running, nil
		}
		if s.clock.Now().After(deadline) {
			return nil, errors.New("TimeoutError: No valid workers found")
		}
		select {
		case <-s.clock.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *Server) updateDataOnWorkers(ctx context.Context, perWorker map[string]*protocol.Map) (map[protocol.Key]int64, error) {
	var mu sync.Mutex
	nbytes := map[protocol.Key]int64{}
	var firstErr error
	var wg sync.WaitGroup
	for w, d := range perWorker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.pool.Call(ctx, w, protocol.NewMap("op", "update_data", "data", d, "reply", true))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("update_data on %s: %w", w, err)
				}
				return
			}
			m, _ := v.(*protocol.Map)
			nb, _ := m.Get("nbytes").(*protocol.Map)
			for _, e := range nb.Items() {
				if k, err := protocol.KeyOf(e.Key); err == nil {
					n, _ := e.Value.(int64)
					nbytes[k] = n
				}
			}
		}()
	}
	wg.Wait()
	return nbytes, firstErr
}

// updateData is the update_data RPC of a direct scatter: the client put the
// data on workers itself and tells us where it is.
func (s *Server) updateData(ctx context.Context, req *comm.Request) (any, error) {
	who, nbytes, err := whoHasAndNBytes(req.Args)
	if err != nil {
		return nil, fmt.Errorf("update_data: %w", err)
	}
	client, _ := req.Args.Get("client").(string)
	_, err = s.loop.call(ctx, func(id int64) scheduler.Stimulus {
		return &scheduler.UpdateData{Base: s.base("update-data"), Client: client, WhoHas: who, NBytes: nbytes, ReplyTo: id}
	})
	return nil, err
}

// broadcast is Scheduler.broadcast: send msg to every (or the given)
// worker or nanny and return {worker: reply}; used by Client.run.
func (s *Server) broadcast(ctx context.Context, req *comm.Request) (any, error) {
	msg, ok := req.Args.Get("msg").(*protocol.Map)
	if !ok {
		return nil, fmt.Errorf("broadcast: msg must be a dict")
	}
	nanny, _ := req.Args.Get("nanny").(bool)
	onError, _ := req.Args.Get("on_error").(string)
	return s.broadcastMsg(ctx, msg, optionalStrings(req.Args.Get("workers")), nanny, onError)
}

// broadcastMsg is the body of Scheduler.broadcast, also used by the
// handlers that fan out to workers (plugins, worker logs). workers nil
// means all; onError is "raise" (default), "ignore" or "return".
func (s *Server) broadcastMsg(ctx context.Context, msg *protocol.Map, workers []string, nanny bool, onError string) (*protocol.Map, error) {
	if onError == "" {
		onError = "raise"
	}
	addrs := map[string]string{}
	if err := s.loop.query(ctx, func(st *scheduler.State) {
		if workers == nil {
			workers = st.WorkerAddresses()
		}
		for _, w := range workers {
			if nanny {
				if n := st.WorkerNanny(w); n != "" {
					addrs[w] = n
				}
			} else {
				addrs[w] = w
			}
		}
	}); err != nil {
		return nil, err
	}
	type result struct {
		worker string
		reply  any
		err    error
	}
	results := make(chan result, len(addrs))
	for w, addr := range addrs {
		go func() {
			m := &protocol.Map{Entries: append([]protocol.Entry(nil), msg.Entries...)}
			m.Set("reply", true)
			v, err := s.pool.Call(ctx, addr, m)
			results <- result{w, v, err}
		}()
	}
	out := &protocol.Map{}
	var firstErr error
	for range addrs {
		r := <-results
		if r.err != nil {
			s.log.Error().Err(r.err).Str("worker", r.worker).Msg("broadcast failed")
			switch onError {
			case "ignore":
				continue
			case "raise":
				if firstErr == nil {
					firstErr = fmt.Errorf("broadcast to %s failed: %w", r.worker, r.err)
				}
				continue
			default:
				out.Entries = append(out.Entries, protocol.Entry{Key: r.worker, Value: r.err.Error()})
				continue
			}
		}
		out.Entries = append(out.Entries, protocol.Entry{Key: r.worker, Value: r.reply})
	}
	if firstErr != nil {
		return nil, firstErr
	}
	sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].Key.(string) < out.Entries[j].Key.(string) })
	return out, nil
}

// proxy forwards one message to one worker (actors).
func (s *Server) proxy(ctx context.Context, req *comm.Request) (any, error) {
	msg, ok := req.Args.Get("msg").(*protocol.Map)
	if !ok {
		return nil, fmt.Errorf("proxy: msg must be a dict")
	}
	worker, _ := req.Args.Get("worker").(string)
	m := &protocol.Map{Entries: append([]protocol.Entry(nil), msg.Entries...)}
	m.Set("reply", true)
	return s.pool.Call(ctx, worker, m)
}
