package server

import (
	"errors"
	"time"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// Lazy decoding: the ops that come once per task are read
// field by field from the batch's msgpack (protocol.Fields) into their
// stimulus, without the generic value tree (a Map per op and per
// start/stop, every number boxed, metadata and status decoded and
// dropped): on a worker's stream task-finished, one or two per batch per
// task, and release-worker-data once the task is forgotten; on a client's
// client-releases-keys, one per future it drops. On the golden 5-op batch
// (protocol/testdata/golden/batch_task_finished), read and converted: 12
// allocations and 427 bytes per op instead of 23 and 1,053, and about a
// third less time (a one-off go test -bench, not kept). Anything
// unexpected (another op, a field of another type) returns false, and the
// op goes through the generic decoder and workerStimulus or
// clientStimulus, which accept or name the bad field exactly as before.

// workerOpFast reads the per-task ops of a worker's stream; reuse is the
// stream's (nil: none).
func workerOpFast(worker string, item []byte, now time.Time, reuse *streamReuse) (scheduler.Stimulus, bool) {
	if st, ok := taskFinishedFast(worker, item, now, reuse); ok {
		return st, true
	}
	return releaseWorkerDataFast(worker, item, now)
}

// streamReuse keeps the task-finished values that repeat from task to task
// on one worker's stream, so that each is allocated once per stream rather
// than once per task: the result's pickled type (the same for a map's
// every task) and the id of the thread that ran it (one per worker
// thread). Shared values are never written: the engine and the task stream
// only read them.
type streamReuse struct {
	typ     []byte
	threads [4]struct {
		id  int64
		val any // the id, boxed
	}
	next int // the threads slot to replace
}

// readType reads task-finished's type: the stream's last bytes when they
// are equal (protocol.Fields.BinAs), a copy otherwise or without reuse.
func (r *streamReuse) readType(f *protocol.Fields) ([]byte, error) {
	if r == nil {
		return f.Bin()
	}
	b, err := f.BinAs(r.typ)
	if err == nil {
		r.typ = b
	}
	return b, err
}

// readThread reads task-finished's thread: an int through the stream's
// boxes (thread), anything else as the generic decoder reads it.
func (r *streamReuse) readThread(f *protocol.Fields) (any, error) {
	if !f.IsInt() {
		return f.Value()
	}
	id, err := f.Int()
	return r.thread(id), err
}

// thread returns id boxed, the stream's box when it has one.
func (r *streamReuse) thread(id int64) any {
	if r == nil {
		return id
	}
	for _, t := range r.threads {
		if t.val != nil && t.id == id {
			return t.val
		}
	}
	t := &r.threads[r.next]
	t.id, t.val = id, id
	r.next = (r.next + 1) % len(r.threads)
	return t.val
}

// opFields starts a fast reader on item, an op dict.
func opFields(item []byte) (f protocol.Fields, ok bool) {
	f, err := protocol.NewFields(item)
	return f, err == nil
}

// commonField reads the fields every op has, for a fast reader of op: it
// refuses another op (errNotLazy), notes that the op was seen and reads
// stimulus_id; took is false for any other field. A direct call (not a
// callback), so that the reader's Fields stays on its stack.
func commonField(f *protocol.Fields, k []byte, op string, seen *bool, id *string) (took bool, err error) {
	switch string(k) {
	case "op":
		var got string
		if got, err = f.Str(); err == nil && got != op {
			return true, errNotLazy
		}
		*seen = true
	case "stimulus_id":
		*id, err = f.Str()
	default:
		return false, nil
	}
	return true, err
}

// clientOpFast reads client-releases-keys (Client._release_key, one per
// future).
func clientOpFast(client string, item []byte, now time.Time) (scheduler.Stimulus, bool) {
	f, ok := opFields(item)
	if !ok {
		return nil, false
	}
	var keys []protocol.Key
	who, seen, id := "", false, ""
	err := f.Each(func(k []byte) (err error) {
		if took, err := commonField(&f, k, "client-releases-keys", &seen, &id); took {
			return err
		}
		switch string(k) {
		case "keys":
			keys, err = f.Keys()
		case "client":
			who, err = f.StrAs(client) // its own id: no copy
		default:
			err = f.Skip()
		}
		return err
	})
	if err != nil || !seen {
		return nil, false
	}
	if who == "" {
		who = client
	}
	return &scheduler.ClientReleasesKeys{Base: stimulusBase(id, "client-releases-keys", now),
		Client: who, Stream: client, Keys: keys}, true
}

// releaseWorkerDataFast reads item as a release-worker-data op.
func releaseWorkerDataFast(worker string, item []byte, now time.Time) (scheduler.Stimulus, bool) {
	f, ok := opFields(item)
	if !ok {
		return nil, false
	}
	var key protocol.Key
	seen, hasKey, id := false, false, ""
	err := f.Each(func(k []byte) (err error) {
		if took, err := commonField(&f, k, "release-worker-data", &seen, &id); took {
			return err
		}
		if string(k) != "key" {
			return f.Skip()
		}
		key, err = f.Key()
		hasKey = err == nil
		return err
	})
	if err != nil || !seen || !hasKey { // no key: the generic reader names it
		return nil, false
	}
	return &scheduler.ReleaseWorkerData{Base: stimulusBase(id, "release-worker-data", now), Worker: worker, Key: key}, true
}

// taskFinishedFast reads item as a task-finished op of worker's stream;
// reuse is the stream's (nil: none).
func taskFinishedFast(worker string, item []byte, now time.Time, reuse *streamReuse) (scheduler.Stimulus, bool) {
	f, ok := opFields(item)
	if !ok {
		return nil, false
	}
	var tf scheduler.TaskFinished
	seen, id := false, ""
	err := f.Each(func(k []byte) (err error) {
		if took, err := commonField(&f, k, "task-finished", &seen, &id); took {
			return err
		}
		switch string(k) {
		case "key":
			tf.Key, err = f.Key()
		case "run_id":
			tf.RunID, err = f.Int()
		case "nbytes":
			tf.NBytes, err = f.Int()
		case "type":
			tf.Type, err = reuse.readType(&f)
		case "typename":
			tf.TypeName, err = f.Str()
		case "startstops":
			tf.StartStops, err = startStopsFast(&f)
		case "thread":
			tf.Thread, err = reuse.readThread(&f)
		case "metadata":
			tf.Metadata, err = taskMetadataFast(&f)
		default: // status: the engine does not read it
			err = f.Skip()
		}
		return err
	})
	if err != nil || !seen {
		return nil, false
	}
	if tf.StartStops == nil {
		tf.StartStops = []scheduler.StartStop{} // as startStops makes it
	}
	tf.Worker = worker
	tf.Base = stimulusBase(id, "task-finished", now)
	out := tf // allocated here, not for an op that turns out to be another
	return &out, true
}

// startStopsFast reads startstops: a list of {"action", "start", "stop"
// [, "source"]} dicts.
func startStopsFast(f *protocol.Fields) ([]scheduler.StartStop, error) {
	n, err := f.Array()
	if err != nil {
		return nil, err
	}
	out := make([]scheduler.StartStop, 0, n)
	var sub protocol.Fields
	for range n {
		if err := f.MapInto(&sub); err != nil {
			return nil, err
		}
		var ss scheduler.StartStop
		err := sub.Each(func(k []byte) (err error) {
			switch string(k) {
			case "action":
				ss.Action, err = sub.Str()
			case "start":
				ss.Start, err = sub.Float()
			case "stop":
				ss.Stop, err = sub.Float()
			case "source":
				ss.Source, err = sub.Str()
			default:
				err = sub.Skip()
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, ss)
	}
	return out, nil
}

// heartbeatFast reads heartbeat_worker's arguments from the undecoded
// request (comm.Server.LazyHandlers): the address, the executing
// durations, and metrics["bandwidth"]["total"], the one metric the engine
// reads; the metrics dict itself is kept as it came (protocol.Raw),
// decoded only if scheduler_info asks. false: read it generically.
func heartbeatFast(raw []byte) (*scheduler.WorkerHeartbeat, bool) {
	f, err := protocol.NewFields(raw)
	if err != nil {
		return nil, false
	}
	hb := &scheduler.WorkerHeartbeat{Executing: map[protocol.Key]float64{}}
	err = f.Each(func(k []byte) (err error) {
		switch string(k) {
		case "address":
			hb.Worker, err = f.Str()
		case "metrics":
			var m []byte
			if m, err = f.Raw(); err == nil && !isNil(m) {
				hb.Metrics = protocol.Raw(m)
				hb.Bandwidth, hb.HasBandwidth, hb.Memory, err = readMetrics(m)
			}
		case "executing":
			var v any
			if v, err = f.Value(); err == nil {
				m, isMap := v.(*protocol.Map)
				if !isMap && v != nil {
					return errNotLazy
				}
				addExecuting(hb.Executing, m)
			}
		case "extensions":
			var v any
			if v, err = f.Value(); err == nil {
				hb.SpanMetrics = heartbeatSpans(v)
			}
		default:
			err = f.Skip()
		}
		return err
	})
	return hb, err == nil && hb.Worker != ""
}

var errNotLazy = errors.New("not for the lazy reader")

func isNil(raw []byte) bool { return len(raw) == 1 && raw[0] == 0xc0 }

// readMetrics reads metrics["bandwidth"]["total"] and the memory figures
// (metrics["memory"], metrics["spilled_bytes"]["memory"] and ["disk"]:
// nil unless all three are there). An error (a metrics that is not a
// dict, a field of another type) sends the heartbeat to the generic
// reader.
func readMetrics(metrics []byte) (total float64, ok bool, mem *scheduler.HeartbeatMemory, err error) {
	f, err := protocol.NewFields(metrics)
	if err != nil {
		return 0, false, nil, err
	}
	var hm scheduler.HeartbeatMemory
	seen := 0
	err = f.Each(func(k []byte) (err error) {
		switch string(k) {
		case "bandwidth":
			total, ok, err = bandwidthTotal(&f)
		case "memory":
			hm.Process, err = f.Int()
			seen++
		case "spilled_bytes":
			var n int
			n, err = spilledBytes(&f, &hm)
			seen += n
		default:
			err = f.Skip()
		}
		return err
	})
	if err == nil && seen == 3 {
		mem = &hm
	}
	return total, ok, mem, err
}

func bandwidthTotal(f *protocol.Fields) (total float64, ok bool, err error) {
	var bw protocol.Fields
	if err := f.MapInto(&bw); err != nil {
		return 0, false, err
	}
	err = bw.Each(func(k []byte) (err error) {
		if string(k) != "total" {
			return bw.Skip()
		}
		total, err = bw.Float()
		ok = err == nil
		return err
	})
	return total, ok, err
}

// spilledBytes reads spilled_bytes' memory and disk into hm; n counts them.
func spilledBytes(f *protocol.Fields, hm *scheduler.HeartbeatMemory) (n int, err error) {
	var sb protocol.Fields
	if err := f.MapInto(&sb); err != nil {
		return 0, err
	}
	err = sb.Each(func(k []byte) (err error) {
		switch string(k) {
		case "memory":
			hm.SpilledMemory, err = sb.Int()
			n++
		case "disk":
			hm.SpilledDisk, err = sb.Int()
			n++
		default:
			err = sb.Skip()
		}
		return err
	})
	return n, err
}
