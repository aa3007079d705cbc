// Package pickle builds the few Python pickles the scheduler originates
// itself (distributed's scheduler pickles KilledWorker, MemoryError, ... when
// it fails a task). Go never unpickles anything: user data passes through as
// opaque blobs. The output uses pickle protocol 2 opcodes only, which every
// Python 3 unpickles; see dask-protocol.md §7.
package pickle

import (
	"encoding/binary"
	"fmt"
	"math"

	"daskgo/protocol"
)

// Opcodes of pickle protocol 2 (Lib/pickle.py).
const (
	opProto      = 0x80
	opGlobal     = 'c'
	opBinUnicode = 'X'
	opBinInt     = 'J'
	opLong1      = 0x8a
	opBinFloat   = 'G'
	opNone       = 'N'
	opEmptyTuple = ')'
	opMark       = '('
	opTuple      = 't'
	opEmptyDict  = '}'
	opSetItem    = 's'
	opReduce     = 'R'
	opBuild      = 'b'
	opStop       = '.'
)

// writer accumulates a pickle.
type writer struct{ b []byte }

func (w *writer) global(module, name string) {
	w.b = append(w.b, opGlobal)
	w.b = append(w.b, module...)
	w.b = append(w.b, '\n')
	w.b = append(w.b, name...)
	w.b = append(w.b, '\n')
}

func (w *writer) str(s string) {
	w.b = append(w.b, opBinUnicode)
	w.b = binary.LittleEndian.AppendUint32(w.b, uint32(len(s)))
	w.b = append(w.b, s...)
}

func (w *writer) int(n int64) {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		w.b = append(w.b, opBinInt)
		w.b = binary.LittleEndian.AppendUint32(w.b, uint32(int32(n)))
		return
	}
	// LONG1: little-endian two's complement, 8 bytes always suffices.
	w.b = append(w.b, opLong1, 8)
	w.b = binary.LittleEndian.AppendUint64(w.b, uint64(n))
}

func (w *writer) float(f float64) {
	w.b = append(w.b, opBinFloat)
	w.b = binary.BigEndian.AppendUint64(w.b, math.Float64bits(f))
}

// value writes a dask key element: str, int, float or a tuple of those.
func (w *writer) value(v any) error {
	switch x := v.(type) {
	case nil:
		w.b = append(w.b, opNone)
	case string:
		w.str(x)
	case int64:
		w.int(x)
	case uint64:
		if x > math.MaxInt64 {
			w.b = append(w.b, opLong1, 9)
			w.b = binary.LittleEndian.AppendUint64(w.b, x)
			w.b = append(w.b, 0)
			return nil
		}
		w.int(int64(x))
	case int:
		w.int(int64(x))
	case float64:
		w.float(x)
	case []any:
		if len(x) == 0 {
			w.b = append(w.b, opEmptyTuple)
			return nil
		}
		w.b = append(w.b, opMark)
		for _, e := range x {
			if err := w.value(e); err != nil {
				return err
			}
		}
		w.b = append(w.b, opTuple)
	default:
		return fmt.Errorf("pickle: cannot write %T", v)
	}
	return nil
}

func (w *writer) bytes() []byte { return append(w.b, opStop) }

func newWriter() *writer { return &writer{b: []byte{opProto, 2}} }

// KilledWorker pickles distributed.scheduler.KilledWorker(task, last_worker,
// allowed_failures). Python passes a WorkerState as last_worker and its
// __str__ reads last_worker.address, so a types.SimpleNamespace with that one
// attribute stands in for it.
func KilledWorker(key protocol.Key, lastWorker string, allowedFailures int) []byte {
	w := newWriter()
	w.global("distributed.scheduler", "KilledWorker")
	w.b = append(w.b, opMark)
	if err := w.value(key.Value()); err != nil {
		w.str(key.String())
	}
	w.global("types", "SimpleNamespace")
	w.b = append(w.b, opEmptyTuple, opReduce, opEmptyDict)
	w.str("address")
	w.str(lastWorker)
	w.b = append(w.b, opSetItem, opBuild)
	w.int(int64(allowedFailures))
	w.b = append(w.b, opTuple, opReduce)
	return w.bytes()
}

// Exception pickles module.class(message), e.g. ("builtins", "MemoryError",
// "...") or ("builtins", "NotImplementedError", "run_on_scheduler is not
// supported by dask-go-scheduler").
func Exception(module, class, message string) []byte {
	w := newWriter()
	w.global(module, class)
	w.str(message)
	w.b = append(w.b, 0x85, opReduce) // TUPLE1
	return w.bytes()
}

// None is the pickle of None; distributed sends it as an empty traceback.
func None() []byte { return []byte{opProto, 2, opNone, opStop} }
