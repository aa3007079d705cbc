package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Lazy decoding of stream batches, whose ops come once per task: a
// worker's batch of task-finished ops is read field by field straight from
// frame 0, into the types the scheduler keeps, without building a Map per
// op, boxing every number or copying the fields it does not read. The scheduler's edge
// (scheduler/server) decodes the ops it knows this way and hands any other
// element to DecodeElement, the generic decoder.
//
// The same rules as Decode: every length is checked against the bytes
// left, nothing is allocated for a length before the bytes exist, and bad
// input is an error wrapping ErrDecode, never a panic.

// SplitBatch returns the raw msgpack of each op of a stream message's
// frame 0: the items of a list, or the one value that is not a list. The
// slices alias frame0. Each item is checked to be whole (skipped over), so
// a truncated or malformed message fails here, before any op is used.
func SplitBatch(frame0 []byte) ([][]byte, error) {
	d := decoder{buf: frame0}
	if len(frame0) > 0 && (frame0[0]&0xf0 == 0x90 || frame0[0] == mpArray16 || frame0[0] == mpArray32) {
		kind, n, err := d.header()
		if err != nil || kind != 'a' {
			return nil, fmt.Errorf("%w: batch header: %v", ErrDecode, err)
		}
		items := make([][]byte, 0, n)
		for i := 0; i < n; i++ {
			start := d.pos
			if err := d.skip(1); err != nil {
				return nil, fmt.Errorf("%w: batch item %d: %v", ErrDecode, i, err)
			}
			items = append(items, frame0[start:d.pos:d.pos])
		}
		if d.pos != len(frame0) {
			return nil, fmt.Errorf("%w: %d trailing bytes after the batch", ErrDecode, len(frame0)-d.pos)
		}
		return items, nil
	}
	if err := d.skip(0); err != nil {
		return nil, fmt.Errorf("%w: frame 0: %v", ErrDecode, err)
	}
	if d.pos != len(frame0) {
		return nil, fmt.Errorf("%w: %d trailing bytes after frame 0's value", ErrDecode, len(frame0)-d.pos)
	}
	return [][]byte{frame0}, nil
}

// DecodeElement decodes one item of SplitBatch as Decode would decode it in
// place: blob markers resolve against the message's frames. Items must be
// decoded in order (blobs claim frames in order).
func DecodeElement(frames [][]byte, item []byte, from *int64) (any, error) {
	d := decoder{buf: item, frames: frames, nextFree: max(1, *from)}
	v, err := d.value(1)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	*from = d.nextFree
	return v, nil
}

// Fields reads the entries of one msgpack map in place, in wire order.
// Values are read with the typed methods, each of which consumes exactly
// one value; a value that is not of the asked type is an error (the caller
// falls back to the generic decoder, which names the field).
type Fields struct {
	d    decoder
	left int // entries not yet read
}

// NewFields starts reading item, which must be a map. It returns a value,
// so that a reader on the stack costs no allocation.
func NewFields(item []byte) (Fields, error) {
	f := Fields{d: decoder{buf: item}}
	kind, n, err := f.d.header()
	if err != nil {
		return Fields{}, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if kind != 'm' {
		return Fields{}, fmt.Errorf("%w: not a map", ErrDecode)
	}
	f.left = n
	return f, nil
}

// ReadValues returns a reader of the msgpack values at the start of b,
// read with the typed methods (Array for a list's length, then its items),
// for a reader of a list rather than of an op dict.
func ReadValues(b []byte) Fields { return Fields{d: decoder{buf: b}} }

// IsNil reports whether the next value is nil, consuming it if so.
func (f *Fields) IsNil() bool {
	if f.d.pos < len(f.d.buf) && f.d.buf[f.d.pos] == mpNil {
		f.d.pos++
		return true
	}
	return false
}

// Next returns the next entry's key, a view into the message (compare it,
// do not keep it); ok is false after the last entry. A key that is not a
// str is an error.
func (f *Fields) Next() (key []byte, ok bool, err error) {
	if f.left == 0 {
		return nil, false, nil
	}
	f.left--
	kind, n, err := f.d.header()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if kind != 's' {
		return nil, false, fmt.Errorf("%w: map key is not a str", ErrDecode)
	}
	key, _ = f.d.take(n) // length checked by header
	return key, true, nil
}

// Each calls fn with each remaining entry's key (a view, as Next's); fn
// consumes the value with one of the typed methods, or Skip. The first
// error ends the walk.
func (f *Fields) Each(fn func(key []byte) error) error {
	for {
		k, more, err := f.Next()
		if err != nil || !more {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
	}
}

// Skip consumes a value without reading it.
func (f *Fields) Skip() error { return wrapDecode(f.d.skip(1)) }

// Raw consumes a value and returns its msgpack, a view into the message:
// what a reader keeps unread (protocol.Raw encodes it back verbatim).
func (f *Fields) Raw() ([]byte, error) {
	start := f.d.pos
	if err := f.d.skip(1); err != nil {
		return nil, wrapDecode(err)
	}
	return f.d.buf[start:f.d.pos], nil
}

// Bool reads a bool (nil reads as false).
func (f *Fields) Bool() (bool, error) {
	kind, _, err := f.d.header()
	switch {
	case err != nil:
		return false, wrapDecode(err)
	case kind == mpTrue:
		return true, nil
	case kind == mpFalse, kind == mpNil:
		return false, nil
	}
	return false, fmt.Errorf("%w: not a bool", ErrDecode)
}

// Int reads an integer that fits int64 (nil reads as 0, as the generic
// path's fields.int does).
func (f *Fields) Int() (int64, error) {
	n, isNil, err := f.expect('i', "an int")
	if err != nil || isNil {
		return 0, err
	}
	return f.d.int64Of(n)
}

// expect reads a value's header and checks its kind; nil is allowed
// (isNil) and means the zero value to every reader.
func (f *Fields) expect(kind byte, what string) (n int, isNil bool, err error) {
	k, n, err := f.d.header()
	switch {
	case err != nil:
		return 0, false, wrapDecode(err)
	case k == mpNil:
		return 0, true, nil
	case k != kind:
		return 0, false, fmt.Errorf("%w: not %s", ErrDecode, what)
	}
	return n, false, nil
}

// Float reads a float (an int converts; nil reads as 0).
func (f *Fields) Float() (float64, error) {
	kind, n, err := f.d.header()
	if err != nil {
		return 0, wrapDecode(err)
	}
	switch kind {
	case mpFloat64:
		b, err := f.d.take(8)
		if err != nil {
			return 0, wrapDecode(err)
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	case mpFloat32:
		b, err := f.d.take(4)
		if err != nil {
			return 0, wrapDecode(err)
		}
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
	case 'i':
		v, err := f.d.int64Of(n)
		return float64(v), err
	case mpNil:
		return 0, nil
	}
	return 0, fmt.Errorf("%w: not a number", ErrDecode)
}

// Str reads a str (copied, or an interned constant; nil reads as "").
func (f *Fields) Str() (string, error) { return f.StrAs("") }

// StrAs reads a str: same itself (no copy) when the str equals it, for a
// field that mostly repeats a value the reader knows; else an interned
// constant or a copy. nil reads as "".
func (f *Fields) StrAs(same string) (string, error) {
	n, isNil, err := f.expect('s', "a str")
	if err != nil || isNil {
		return "", err
	}
	b, _ := f.d.take(n) // length checked by header
	if string(b) == same {
		return same, nil
	}
	if v, ok := lookupInterned(b); ok {
		return v.(string), nil
	}
	return string(b), nil
}

// BinAs reads a bin value: same itself (no copy) when the bytes equal
// it, else a copy. nil reads as nil.
func (f *Fields) BinAs(same []byte) ([]byte, error) {
	n, isNil, err := f.expect('b', "a bin")
	if err != nil || isNil {
		return nil, err
	}
	b, _ := f.d.take(n) // length checked by header
	if same != nil && string(b) == string(same) {
		return same, nil
	}
	return append([]byte(nil), b...), nil
}

// IsInt reports whether the next value is an integer (Int reads it unless
// it is a uint64 beyond int64), without consuming it.
func (f *Fields) IsInt() bool {
	if f.d.pos >= len(f.d.buf) {
		return false
	}
	c := f.d.buf[f.d.pos]
	return c <= 0x7f || c >= 0xe0 || (c >= 0xcc && c <= 0xd3)
}

// Bin reads a bin value (copied; nil reads as nil).
func (f *Fields) Bin() ([]byte, error) { return f.BinAs(nil) }

// Value decodes a value generically, as Decode would without blobs (a
// blob marker inside is an error: the fast path is for ops without them).
func (f *Fields) Value() (any, error) {
	f.d.frames, f.d.nextFree = noFrames, 1 // markers resolve against no frame: an error
	v, err := f.d.value(1)
	return v, wrapDecode(err)
}

// Array reads an array header: the items follow, read with the same
// methods (nil reads as an empty array).
func (f *Fields) Array() (int, error) {
	n, _, err := f.expect('a', "an array")
	return n, err
}

// MapInto reads a map value into sub, a Fields over its entries (the
// caller's, so that a nested map costs no allocation); f continues after
// the map whether or not sub's entries are read.
func (f *Fields) MapInto(sub *Fields) error {
	kind, n, err := f.d.header()
	switch {
	case err != nil:
		return wrapDecode(err)
	case kind != 'm':
		return fmt.Errorf("%w: not a map", ErrDecode)
	}
	start := f.d.pos
	for i := 0; i < 2*n; i++ {
		if err := f.d.skip(2); err != nil {
			return wrapDecode(err)
		}
	}
	*sub = Fields{d: decoder{buf: f.d.buf[start:f.d.pos]}, left: n}
	return nil
}

// int64Of finishes an integer whose code header returned, without boxing
// it (integer's any would allocate for most values); a uint64 beyond int64
// is an error.
func (d *decoder) int64Of(c int) (int64, error) {
	if c <= 0x7f || c >= 0xe0 {
		return fixint(c), nil
	}
	u, width, err := d.intBits(c)
	switch {
	case err != nil:
		return 0, wrapDecode(err)
	case c > mpUint64:
		return signExtend(u, width), nil
	case u > math.MaxInt64:
		return 0, fmt.Errorf("%w: integer beyond int64", ErrDecode)
	}
	return int64(u), nil
}

// noFrames is a message of frame 0 alone, for Value's decoder.
var noFrames = [][]byte{nil}

func wrapDecode(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrDecode, err)
}

// Key reads a dask key. A str in msgpack's smallest form, which is what
// Python writes, is already its canonical Key and is copied once; anything
// else goes through Value and KeyOf, which canonicalize it or refuse it
// with the error the generic path gives.
func (f *Fields) Key() (Key, error) {
	if raw, ok := minimalStr(f.d.buf[f.d.pos:]); ok {
		f.d.pos += len(raw)
		return Key(raw), nil
	}
	v, err := f.Value()
	if err != nil {
		return "", err
	}
	return KeyOf(v)
}

// Keys reads a list of dask keys (nil reads as none), as KeysOf reads
// the decoded list.
func (f *Fields) Keys() ([]Key, error) {
	if f.IsNil() {
		return nil, nil
	}
	n, err := f.Array()
	if err != nil {
		return nil, err
	}
	keys := make([]Key, n)
	for i := range keys {
		if keys[i], err = f.Key(); err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
	}
	return keys, nil
}

// minimalStr returns the str at the start of b, header included, when it
// is complete and its header is the smallest that fits its length.
func minimalStr(b []byte) ([]byte, bool) {
	if len(b) == 0 {
		return nil, false
	}
	var n, hdr int
	switch c := b[0]; {
	case c&0xe0 == 0xa0:
		n, hdr = int(c&0x1f), 1
	case c == 0xd9 && len(b) >= 2 && b[1] >= 32:
		n, hdr = int(b[1]), 2
	case c == 0xda && len(b) >= 3:
		n, hdr = int(binary.BigEndian.Uint16(b[1:])), 3
		if n <= math.MaxUint8 {
			return nil, false
		}
	default: // str32 keys do not occur; Value and KeyOf take them
		return nil, false
	}
	if len(b) < hdr+n {
		return nil, false
	}
	return b[:hdr+n], true
}

// DecodeKeepingRaw decodes a one-frame message as Decode does, except
// that the value of the top-level map's field named raw stays undecoded:
// a Raw view into frames[0], whose buffer the caller must therefore not
// reuse while the value is in use (ReadFrames allocates one per message;
// ReadFramesReusing's scratch does not qualify). A reader that parses a
// big list itself (the helper's task records) skips the generic value
// tree. A message of several frames, or one this reader cannot take, is
// decoded by Decode, which also names what is wrong with it.
func DecodeKeepingRaw(frames [][]byte, raw string) (any, error) {
	if len(frames) != 1 {
		return Decode(frames)
	}
	f, err := NewFields(frames[0])
	if err != nil {
		return Decode(frames)
	}
	m := &Map{Entries: make([]Entry, 0, f.left)}
	for {
		k, more, err := f.Next()
		if err != nil {
			return Decode(frames)
		}
		if !more {
			break
		}
		var v any
		if string(k) == raw {
			var r []byte
			r, err = f.Raw()
			v = Raw(r)
		} else {
			v, err = f.Value()
		}
		if err != nil {
			return Decode(frames)
		}
		name, ok := lookupInterned(k)
		if !ok {
			name = string(k)
		}
		m.Entries = append(m.Entries, Entry{Key: name, Value: v})
	}
	if f.d.pos != len(frames[0]) {
		return Decode(frames)
	}
	return m, nil
}
