// Package pickle builds the few Python pickles the scheduler originates
// itself: distributed's scheduler pickles KilledWorker, MemoryError, ...
// when it fails a task, and clients unpickle them to re-raise. Go never
// unpickles anything; user data passes through as opaque blobs.
//
// The pickles are written with github.com/kisielk/og-rek (pickle protocol 2,
// which every Python 3 loads) as GLOBAL + REDUCE calls only: an exception
// is its class called with its args, as BaseException.__reduce__ has it
// (distributed/scheduler.py raises KilledWorker and the others this way).
package pickle

import (
	"bytes"
	"fmt"

	ogorek "github.com/kisielk/og-rek"

	"daskgo/protocol"
)

func encode(v any) []byte {
	var buf bytes.Buffer
	enc := ogorek.NewEncoderWithConfig(&buf, &ogorek.EncoderConfig{Protocol: 2, StrictUnicode: true})
	if err := enc.Encode(v); err != nil {
		// Only Go values built below reach the encoder; failing here is a bug.
		panic(fmt.Sprintf("pickle: encode %T: %v", v, err))
	}
	return buf.Bytes()
}

// keyValue turns a dask key into the Go values og-rek pickles as Python
// str, int, float and tuple.
func keyValue(v any) any {
	switch x := v.(type) {
	case []any:
		t := make(ogorek.Tuple, len(x))
		for i, e := range x {
			t[i] = keyValue(e)
		}
		return t
	case nil:
		return ogorek.None{}
	default:
		return x
	}
}

// KilledWorker pickles distributed.scheduler.KilledWorker(task, last_worker,
// allowed_failures). Python passes a WorkerState as last_worker and the
// exception's __str__ reads last_worker.address, so a class made on the fly,
// type("WorkerState", (), {"address": addr}), stands in for it: a REDUCE
// call that needs no BUILD opcode.
func KilledWorker(key protocol.Key, lastWorker string, allowedFailures int) []byte {
	worker := ogorek.Call{
		Callable: ogorek.Class{Module: "builtins", Name: "type"},
		Args:     ogorek.Tuple{"WorkerState", ogorek.Tuple{}, ogorek.NewDictWithData("address", lastWorker)},
	}
	return encode(ogorek.Call{
		Callable: ogorek.Class{Module: "distributed.scheduler", Name: "KilledWorker"},
		Args:     ogorek.Tuple{keyValue(key.Value()), worker, int64(allowedFailures)},
	})
}

// NoValidWorkerError pickles distributed.scheduler.NoValidWorkerError(task,
// host_restrictions, worker_restrictions, resource_restrictions, timeout):
// a task timed out (no-workers-timeout) waiting for a worker that meets
// its restrictions. The restrictions are sets and a dict, as the Python
// scheduler passes them; timeout is in seconds.
func NoValidWorkerError(key protocol.Key, hosts, workers []string, resources map[string]float64, timeout float64) []byte {
	res := ogorek.NewDict()
	for r, q := range resources {
		res.Set(r, q)
	}
	return encode(ogorek.Call{
		Callable: ogorek.Class{Module: "distributed.scheduler", Name: "NoValidWorkerError"},
		Args:     ogorek.Tuple{keyValue(key.Value()), pySet(hosts), pySet(workers), res, timeout},
	})
}

// NoWorkerError pickles distributed.scheduler.NoWorkerError(task, timeout):
// a task timed out (no-workers-timeout) while no worker was running.
func NoWorkerError(key protocol.Key, timeout float64) []byte {
	return encode(ogorek.Call{
		Callable: ogorek.Class{Module: "distributed.scheduler", Name: "NoWorkerError"},
		Args:     ogorek.Tuple{keyValue(key.Value()), timeout},
	})
}

// pySet is builtins.set(list): protocol 2 has no set opcode.
func pySet(xs []string) ogorek.Call {
	l := make([]any, len(xs))
	for i, x := range xs {
		l[i] = x
	}
	return ogorek.Call{Callable: ogorek.Class{Module: "builtins", Name: "set"}, Args: ogorek.Tuple{l}}
}

// Exception pickles module.class(message), e.g. ("builtins", "MemoryError",
// "...") or ("builtins", "NotImplementedError", "...").
func Exception(module, class, message string) []byte {
	return encode(ogorek.Call{
		Callable: ogorek.Class{Module: module, Name: class},
		Args:     ogorek.Tuple{message},
	})
}

// None is the pickle of None; distributed sends it as an empty traceback.
func None() []byte { return encode(ogorek.None{}) }
