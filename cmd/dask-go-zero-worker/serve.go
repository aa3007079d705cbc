package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
)

// heartbeats is Worker.heartbeat: a heartbeat_worker RPC on its own
// connection (or a shared one, --heartbeat-conns), first after one
// interval, then at the interval each reply dictates. A "missing" reply
// (the scheduler forgot us) ends the worker.
func (w *worker) heartbeats(ctx context.Context, interval time.Duration) error {
	conn, err := w.cfg.heartbeats(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("heartbeat connection: %w", err)
	}
	defer conn.close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		reply, err := conn.call(callCtx, w.heartbeatMsg())
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("heartbeat: %w", err)
		}
		m, _ := reply.(*protocol.Map)
		if m.Get("status") == "missing" {
			return fmt.Errorf("heartbeat: scheduler says this worker is missing")
		}
		interval = heartbeatInterval(m.Get("heartbeat-interval"), interval)
	}
}

func (w *worker) heartbeatMsg() *protocol.Map {
	w.heartbeatsSent.Add(1)
	return protocol.NewMap(
		"op", "heartbeat_worker",
		"address", w.address,
		"now", unixNow(),
		"metrics", w.metrics(),
		"executing", protocol.NewMap(),
		"extensions", protocol.NewMap(),
		"reply", true,
	)
}

// flood is --heartbeat-flood: heartbeat_worker RPCs back to back on a
// connection of its own, each sent the moment the last reply came, until
// ctx ends: a misbehaving worker for the stress suite's fairness case.
func (w *worker) flood(ctx context.Context) {
	conn, err := dialOwn(ctx, w.cfg.scheduler)
	if err != nil {
		return
	}
	defer conn.close()
	for ctx.Err() == nil {
		callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := conn.call(callCtx, w.heartbeatMsg())
		cancel()
		if err != nil {
			return
		}
	}
}

// metrics has the shape of Worker.get_metrics: the Python scheduler reads
// bandwidth, digests_total_since_heartbeat, memory and spilled_bytes in
// heartbeat_worker; the rest only shows up in identity().
func (w *worker) metrics() *protocol.Map {
	w.mu.Lock()
	held := int64(len(w.held))
	w.mu.Unlock()
	return protocol.NewMap(
		"task_counts", protocol.NewMap(),
		"bandwidth", protocol.NewMap("total", 100e6, "workers", protocol.NewMap(), "types", protocol.NewMap()),
		"digests_total_since_heartbeat", protocol.NewMap(),
		"managed_bytes", held*resultNbytes,
		"spilled_bytes", protocol.NewMap("memory", 0, "disk", 0),
		"transfer", protocol.NewMap(
			"incoming_bytes", 0, "incoming_count", 0, "incoming_count_total", 0,
			"outgoing_bytes", 0, "outgoing_count", 0, "outgoing_count_total", w.served.Load(),
		),
		"event_loop_interval", 0.02,
		"cpu", 0.0,
		"memory", selfRSS(),
		"time", unixNow(),
		"host_net_io", protocol.NewMap("read_bps", 0.0, "write_bps", 0.0),
		"host_disk_io", protocol.NewMap("read_bps", 0.0, "write_bps", 0.0),
		"num_fds", 0,
	)
}

// getData is Worker.get_data for keys we hold: each is served as a pickled
// 0 (a Serialize payload with the pickle serializer); keys we do not hold are
// left out, as a stock worker does. The caller acknowledges with "OK".
func (w *worker) getData(_ context.Context, req *comm.Request) (any, error) {
	keys, _ := req.Args.Get("keys").([]any)
	data := &protocol.Map{}
	for _, v := range keys {
		k, err := protocol.KeyOf(v)
		if err != nil {
			return nil, fmt.Errorf("get_data: %w", err)
		}
		w.mu.Lock()
		_, ok := w.held[k]
		w.mu.Unlock()
		if !ok {
			continue
		}
		blob, err := protocol.NewSerialized(protocol.NewMap("serializer", "pickle", "writeable", []any{}),
			[][]byte{zeroPickle}, 0)
		if err != nil {
			return nil, fmt.Errorf("get_data: %w", err)
		}
		data.Entries = append(data.Entries, protocol.Entry{Key: k, Value: blob})
	}
	req.SkipReply()
	if err := req.Conn.Write(protocol.NewMap("status", "OK", "data", data)); err != nil {
		req.Conn.Close()
		return nil, fmt.Errorf("get_data reply: %w", err)
	}
	ack, err := req.Conn.Read()
	if err != nil || ack != "OK" {
		req.Conn.Close() // out of step with the caller: the connection is unusable
		return nil, fmt.Errorf("get_data: expected \"OK\" after the data, got %v (%v)", ack, err)
	}
	w.served.Add(int64(data.Len()))
	return nil, nil
}

// heartbeatInterval reads the scheduler's "heartbeat-interval" (seconds).
func heartbeatInterval(v any, fallback time.Duration) time.Duration {
	var s float64
	switch x := v.(type) {
	case float64:
		s = x
	case int64:
		s = float64(x)
	default:
		return fallback
	}
	if s <= 0 || s > 3600 {
		return fallback
	}
	return time.Duration(s * float64(time.Second))
}

// selfRSS is this process's resident set size from /proc (0 elsewhere).
func selfRSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, rss int64
	if _, err := fmt.Sscan(string(b), &size, &rss); err != nil {
		return 0
	}
	return rss * int64(os.Getpagesize())
}
