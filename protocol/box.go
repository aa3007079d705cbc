package protocol

import "unsafe"

// Converting a value that is not pointer-shaped (an int64, a slice) to an
// interface copies it to the heap (runtime.convT64, convTslice): one
// allocation each. A message the engine builds per task holds several such
// values (compute-task's run_id and priority, free-keys' key list), and
// those allocations were a third of its allocations per task
// (BenchmarkEngineReplay). The helpers here return an interface value whose
// data word points at the caller's own storage instead, typically a field
// of the one allocation that holds the whole message.
//
// Invariant: the value at p must not change while the interface value is
// in use, since Go treats the data behind an interface as immutable (two
// values compare by it, type assertions copy it out). The collector keeps
// the enclosing allocation alive through the interior pointer, as it does
// for any pointer into a struct.

// eface is the layout of an empty interface value.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

func typeWord(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

// the type words, from zero values, which convert without allocating
var (
	int64Type   = typeWord(int64(0))
	float64Type = typeWord(float64(0))
	anysType    = typeWord([]any(nil))
	keysType    = typeWord([]Key(nil))
	keyType     = typeWord(Key(""))
)

func boxAt(typ unsafe.Pointer, p unsafe.Pointer) any {
	e := eface{typ: typ, data: p}
	return *(*any)(unsafe.Pointer(&e))
}

// Int64At returns *p as an int64 interface value stored at p.
func Int64At(p *int64) any { return boxAt(int64Type, unsafe.Pointer(p)) }

// Float64At returns *p as a float64 interface value stored at p.
func Float64At(p *float64) any { return boxAt(float64Type, unsafe.Pointer(p)) }

// AnysAt returns *p as a []any interface value stored at p.
func AnysAt(p *[]any) any { return boxAt(anysType, unsafe.Pointer(p)) }

// KeyAt returns *p as a Key interface value stored at p.
func KeyAt(p *Key) any { return boxAt(keyType, unsafe.Pointer(p)) }

// KeysAt returns *p as a []Key interface value stored at p.
func KeysAt(p *[]Key) any { return boxAt(keysType, unsafe.Pointer(p)) }
