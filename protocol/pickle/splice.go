package pickle

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Task specs travel from the materializer helper without their callables:
// the helper pickles each task with a pickle.Pickler whose persistent_id
// turns every function (and bound method, functools.partial) into an index
// into a per-graph object table, and pickles each distinct object of that
// table once (with distributed.protocol.pickle.dumps, so by value where
// distributed would use cloudpickle). Re-pickling a function defined in
// __main__ for each of 200k tasks was half of the helper's time.
//
// A stock worker cannot resolve persistent ids, so before a run_spec goes
// out Splice rewrites "<int> BINPERSID" into pickle.loads(<the object's
// pickle>): the worker gets one self-contained protocol-5 pickle that loads
// to the same dask._task_spec objects the task had in the helper. An object
// that occurs twice in one task is loaded once and memoized, so identity
// inside a task is kept; memo indices after an inserted MEMOIZE are
// renumbered. FRAME opcodes are dropped (they only delimit read-ahead, and
// their lengths change).
//
// The helper's faster form of the same reference is a memo get: its pickler
// starts each task with a memo pre-populated with the table's callables at
// TableMemoBase + their table index, so a callable costs pickle a memo probe
// instead of a Python persistent_id call for every object of every task.
// The task's own memo entries are then numbered from the count of
// pre-populated ones (the memo base, sent with each spec), where a worker's
// unpickler numbers them from 0: Prepare renumbers them in place, and Splice
// treats a get of TableMemoBase + i as it treats "<i> BINPERSID".

// TableMemoBase is the memo index of the object table's first entry in a
// spec pickled with a pre-populated memo (compat/materializer.py
// TABLE_MEMO_BASE): far above any memo a task's own pickle fills, and
// within LONG_BINGET's 32 bits.
const TableMemoBase = 1 << 30

// ErrMalformed wraps every reason a spec pickle is rejected.
var ErrMalformed = errors.New("malformed task pickle")

// Opcodes this file reads or writes (pickletools names).
const (
	opMark           = '('
	opStop           = '.'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opBinInt2        = 'M'
	opBinPersID      = 'Q'
	opBinGet         = 'h'
	opLongBinGet     = 'j'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opProto          = 0x80
	opTuple1         = 0x85
	opReduce         = 'R'
	opShortBinUni    = 0x8c
	opShortBinBytes  = 'C'
	opBinBytes       = 'B'
	opBinBytes8      = 0x8e
	opStackGlobal    = 0x93
	opMemoize        = 0x94
	opFrame          = 0x95
	opNextBuffer     = 0x97
	opReadonlyBuffer = 0x98
)

// argKind says how an opcode's argument is laid out after the opcode byte.
type argKind uint8

const (
	argBad     argKind = iota // not an opcode
	argNone                   // no argument
	argFixed                  // size bytes
	argLen1                   // 1-byte length, then that many bytes
	argLen4                   // 4-byte little-endian length, then bytes
	argLen8                   // 8-byte little-endian length, then bytes
	argLine                   // text up to and including '\n'
	argTwoLine                // two such lines (GLOBAL, INST)
)

type opInfo struct {
	kind argKind
	size int // argFixed only
}

var opTable = func() [256]opInfo {
	var t [256]opInfo
	// a []byte, not a string: ranging over a string would decode the
	// bytes >= 0x80 as (invalid) UTF-8
	for _, c := range []byte("(.012NQRabd}el]ost)\x81\x85\x86\x87\x88\x89\x8f\x90\x91\x92\x93\x94\x97\x98u") {
		t[c] = opInfo{kind: argNone}
	}
	for c, n := range map[byte]int{'K': 1, 'M': 2, 'J': 4, 'G': 8, 'h': 1, 'j': 4, 'q': 1, 'r': 4,
		0x80: 1, 0x82: 1, 0x83: 2, 0x84: 4, 0x95: 8} {
		t[c] = opInfo{kind: argFixed, size: n}
	}
	for _, c := range []byte{'U', 0x8c, 'C', 0x8a} {
		t[c] = opInfo{kind: argLen1}
	}
	for _, c := range []byte{'T', 'X', 'B', 0x8b} {
		t[c] = opInfo{kind: argLen4}
	}
	for _, c := range []byte{0x8d, 0x8e, 0x96} {
		t[c] = opInfo{kind: argLen8}
	}
	for _, c := range "ILFSVPgp" {
		t[byte(c)] = opInfo{kind: argLine}
	}
	t['c'] = opInfo{kind: argTwoLine}
	t['i'] = opInfo{kind: argTwoLine}
	return t
}()

// op is one decoded opcode: its code, where it starts, where its argument
// starts, and where the next opcode starts.
type op struct {
	code            byte
	start, arg, end int
}

// next decodes the opcode at p, never trusting a length beyond the buffer.
func next(b []byte, p int) (op, error) {
	if p >= len(b) {
		return op{}, fmt.Errorf("%w: ends without STOP", ErrMalformed)
	}
	o := op{code: b[p], start: p, arg: p + 1}
	info := opTable[o.code]
	var n uint64
	switch info.kind {
	case argBad:
		return op{}, fmt.Errorf("%w: unknown opcode 0x%02x at %d", ErrMalformed, o.code, p)
	case argNone:
		o.end = o.arg
		return o, nil
	case argFixed:
		n = uint64(info.size)
	case argLen1, argLen4, argLen8:
		w := 1
		if info.kind == argLen4 {
			w = 4
		} else if info.kind == argLen8 {
			w = 8
		}
		if len(b)-o.arg < w {
			return op{}, fmt.Errorf("%w: truncated length at %d", ErrMalformed, p)
		}
		switch w {
		case 1:
			n = uint64(b[o.arg])
		case 4:
			n = uint64(binary.LittleEndian.Uint32(b[o.arg:]))
		default:
			n = binary.LittleEndian.Uint64(b[o.arg:])
		}
		o.arg += w
	case argLine, argTwoLine:
		lines := 1
		if info.kind == argTwoLine {
			lines = 2
		}
		q := o.arg
		for ; lines > 0; lines-- {
			for q < len(b) && b[q] != '\n' {
				q++
			}
			if q >= len(b) {
				return op{}, fmt.Errorf("%w: unterminated text argument at %d", ErrMalformed, p)
			}
			q++
		}
		o.end = q
		return o, nil
	}
	if n > uint64(len(b)-o.arg) {
		return op{}, fmt.Errorf("%w: argument of opcode 0x%02x at %d runs past the end", ErrMalformed, o.code, p)
	}
	o.end = o.arg + int(n)
	return o, nil
}

// uintArg is the value of a BININT1/BININT2/BININT argument (BININT read as
// unsigned: persistent ids are table indices, never negative).
func uintArg(b []byte, o op) (int, bool) {
	switch o.code {
	case opBinInt1:
		return int(b[o.arg]), true
	case opBinInt2:
		return int(binary.LittleEndian.Uint16(b[o.arg:])), true
	case opBinInt:
		v := int32(binary.LittleEndian.Uint32(b[o.arg:]))
		return int(v), v >= 0
	}
	return 0, false
}

// Scan is Prepare of a spec without a memo base: it only checks.
func Scan(spec []byte, nobjs int) (refs int, err error) {
	return Prepare(spec, nobjs, 0)
}

// Prepare checks a spec pickle from the helper and, when memoBase > 0,
// renumbers its own memo gets in place to count from 0 as a worker's
// unpickler does (so it runs once per spec). It checks well-formed opcodes
// up to a final STOP, no out-of-band buffers, every BINPERSID preceded by
// the push of an index below nobjs, every get of the table's memo
// (TableMemoBase + i) with i below nobjs, and, where there are references
// to the table or a memo base, the memo discipline Splice renumbers
// (MEMOIZE only, gets of indices already set). It returns how many table
// references the spec has; zero means the pickle (renumbered) is already
// what a worker loads. Splice succeeds on every pickle Prepare accepts with
// refs > 0.
func Prepare(spec []byte, nobjs, memoBase int) (refs int, err error) {
	if memoBase < 0 || memoBase >= TableMemoBase {
		return 0, fmt.Errorf("%w: memo base %d", ErrMalformed, memoBase)
	}
	var prev op
	memo := 0             // MEMOIZE count so far
	explicitMemo := false // PUT-style memo opcodes (protocols < 4): Splice cannot renumber them
	badGet := false       // a memo get of an index not set yet
	for p := 0; ; {
		o, err := next(spec, p)
		if err != nil {
			return 0, err
		}
		switch o.code {
		case opBinPersID:
			i, ok := uintArg(spec, prev)
			if !ok || prev.end != o.start {
				return 0, fmt.Errorf("%w: BINPERSID at %d without an index before it", ErrMalformed, o.start)
			}
			if i >= nobjs {
				return 0, fmt.Errorf("%w: persistent id %d, the graph has %d objects", ErrMalformed, i, nobjs)
			}
			refs++
		case opNextBuffer, opReadonlyBuffer:
			return 0, fmt.Errorf("%w: out-of-band buffer at %d", ErrMalformed, o.start)
		case 'P':
			return 0, fmt.Errorf("%w: text PERSID at %d", ErrMalformed, o.start)
		case opBinPut, opLongBinPut, 'p', 'g':
			explicitMemo = true
		case opMemoize:
			memo++
		case opBinGet, opLongBinGet:
			idx := int(spec[o.arg])
			if o.code == opLongBinGet {
				idx = int(binary.LittleEndian.Uint32(spec[o.arg:]))
			}
			if idx >= TableMemoBase {
				if idx-TableMemoBase >= nobjs {
					return 0, fmt.Errorf("%w: memo reference to object %d, the graph has %d objects", ErrMalformed, idx-TableMemoBase, nobjs)
				}
				refs++
				break
			}
			if memoBase > 0 {
				if idx < memoBase {
					return 0, fmt.Errorf("%w: memo get %d at %d below the memo base %d", ErrMalformed, idx, o.start, memoBase)
				}
				idx -= memoBase
				if o.code == opLongBinGet {
					binary.LittleEndian.PutUint32(spec[o.arg:], uint32(idx))
				} else {
					spec[o.arg] = byte(idx)
				}
			}
			badGet = badGet || idx >= memo
		case opStop:
			if o.end != len(spec) {
				return 0, fmt.Errorf("%w: %d bytes after STOP", ErrMalformed, len(spec)-o.end)
			}
			// what Splice needs only matters where it will run, or where
			// the memo was renumbered
			if (refs > 0 || memoBase > 0) && explicitMemo {
				return 0, fmt.Errorf("%w: explicit memo opcodes in a pickle with persistent ids or a memo base", ErrMalformed)
			}
			if (refs > 0 || memoBase > 0) && badGet {
				return 0, fmt.Errorf("%w: memo get before its MEMOIZE in a pickle with persistent ids or a memo base", ErrMalformed)
			}
			return refs, nil
		}
		prev, p = o, o.end
	}
}

// References counts a spec's references to the object table by form:
// persistent ids, and gets of the table's memo. It stops at the first
// malformed opcode (a spec Prepare accepted has none).
func References(spec []byte) (persistentIDs, memoGets int) {
	for p := 0; ; {
		o, err := next(spec, p)
		if err != nil || o.code == opStop {
			return persistentIDs, memoGets
		}
		switch {
		case o.code == opBinPersID:
			persistentIDs++
		case o.code == opLongBinGet && binary.LittleEndian.Uint32(spec[o.arg:]) >= TableMemoBase:
			memoGets++
		}
		p = o.end
	}
}

// Splice returns spec with each "<i> BINPERSID" and each get of
// TableMemoBase + i replaced by pickle.loads(objs[i]), appended to dst. spec
// must have passed Prepare with len(objs) objects.
func Splice(dst, spec []byte, objs [][]byte) ([]byte, error) {
	out := dst
	// memo maps the spec's memo indices to the output's; loaded holds the
	// output memo index of each object loaded so far.
	var memo []uint32
	var loaded []loadedObj // few per task: a linear scan beats a map
	nextMemo := uint32(0)
	pending := -1 // start in out of a pid push not yet consumed
	for p := 0; ; {
		o, err := next(spec, p)
		if err != nil {
			return nil, err
		}
		switch o.code {
		case opFrame:
			// dropped
		case opBinInt1, opBinInt2, opBinInt:
			pending = len(out)
			out = append(out, spec[o.start:o.end]...)
		case opBinPersID:
			if pending < 0 {
				return nil, fmt.Errorf("%w: BINPERSID at %d without an index before it", ErrMalformed, o.start)
			}
			i, _ := uintArg(out[pending:], op{code: out[pending], arg: 1})
			out = out[:pending]
			if out, loaded, nextMemo, err = appendObject(out, loaded, nextMemo, objs, i); err != nil {
				return nil, err
			}
		case opMemoize:
			memo = append(memo, nextMemo)
			nextMemo++
			out = append(out, opMemoize)
		case opBinGet, opLongBinGet:
			var idx uint32
			if o.code == opBinGet {
				idx = uint32(spec[o.arg])
			} else {
				idx = binary.LittleEndian.Uint32(spec[o.arg:])
			}
			if idx >= TableMemoBase {
				if out, loaded, nextMemo, err = appendObject(out, loaded, nextMemo, objs, int(idx-TableMemoBase)); err != nil {
					return nil, err
				}
				break
			}
			if int(idx) >= len(memo) {
				return nil, fmt.Errorf("%w: memo get %d before it was set", ErrMalformed, idx)
			}
			out = appendGet(out, memo[idx])
		case opBinPut, opLongBinPut, 'p', 'g', 'P', opNextBuffer, opReadonlyBuffer:
			return nil, fmt.Errorf("%w: opcode 0x%02x at %d cannot be spliced", ErrMalformed, o.code, o.start)
		case opStop:
			if o.end != len(spec) {
				return nil, fmt.Errorf("%w: %d bytes after STOP", ErrMalformed, len(spec)-o.end)
			}
			return append(out, opStop), nil
		default:
			out = append(out, spec[o.start:o.end]...)
		}
		if o.code != opBinInt1 && o.code != opBinInt2 && o.code != opBinInt {
			pending = -1
		}
		p = o.end
	}
}

// appendObject writes table object i, whichever form referred to it:
// pickle.loads of its pickle the first time, memoized, and a get of that
// memo entry after, so the object is one object wherever the task refers
// to it.
func appendObject(out []byte, loaded []loadedObj, nextMemo uint32, objs [][]byte, i int) ([]byte, []loadedObj, uint32, error) {
	if i < 0 || i >= len(objs) {
		return nil, nil, 0, fmt.Errorf("%w: reference to table object %d of %d", ErrMalformed, i, len(objs))
	}
	if m, ok := findLoaded(loaded, i); ok {
		return appendGet(out, m), loaded, nextMemo, nil
	}
	out = appendLoads(out, objs[i])
	out = append(out, opMemoize)
	return out, append(loaded, loadedObj{i, nextMemo}), nextMemo + 1, nil
}

// loadedObj is an object already loaded in the output, at memo index memo.
type loadedObj struct {
	obj  int
	memo uint32
}

func findLoaded(l []loadedObj, obj int) (uint32, bool) {
	for _, x := range l {
		if x.obj == obj {
			return x.memo, true
		}
	}
	return 0, false
}

// appendGet writes a memo get of index m in the short form when it fits.
func appendGet(b []byte, m uint32) []byte {
	if m < 256 {
		return append(b, opBinGet, byte(m))
	}
	b = append(b, opLongBinGet)
	return binary.LittleEndian.AppendUint32(b, m)
}

// appendLoads writes pickle.loads(obj): the global, the bytes, a 1-tuple,
// REDUCE. Nothing here is memoized, so the spec's memo indices stay valid.
func appendLoads(b, obj []byte) []byte {
	b = append(b, opShortBinUni, 6)
	b = append(b, "pickle"...)
	b = append(b, opShortBinUni, 5)
	b = append(b, "loads"...)
	b = append(b, opStackGlobal)
	switch {
	case len(obj) < 256:
		b = append(b, opShortBinBytes, byte(len(obj)))
	case uint64(len(obj)) < 1<<32:
		b = append(b, opBinBytes)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(obj)))
	default:
		b = append(b, opBinBytes8)
		b = binary.LittleEndian.AppendUint64(b, uint64(len(obj)))
	}
	b = append(b, obj...)
	return append(b, opTuple1, opReduce)
}
