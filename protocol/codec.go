package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// ErrDecode is wrapped by every error the message decoder returns for
// malformed peer input.
var ErrDecode = errors.New("protocol: malformed message")

// maxDepth bounds nesting so that a hostile message cannot blow the stack.
const maxDepth = 256

// Decode turns the frames of one message into its value tree (see value.go).
// Frame 0 is msgpack; {"__Serialized__": i} and {"__Pickled__": i} markers are
// resolved into Blobs that alias frames[i..]; {"__Set__": ...} becomes a Set.
// Blob frames are not copied: they share memory with frames.
func Decode(frames [][]byte) (any, error) {
	if len(frames) == 0 {
		return nil, fmt.Errorf("%w: message has no frames", ErrDecode)
	}
	d := decoder{frames: frames}
	d.dec = msgpack.NewDecoder(bytes.NewReader(frames[0]))
	d.remaining = len(frames[0])
	v, err := d.value(0)
	if err != nil {
		return nil, fmt.Errorf("%w: frame 0: %v", ErrDecode, err)
	}
	if d.dec.Buffered().(*bytes.Reader).Len() != 0 {
		return nil, fmt.Errorf("%w: trailing bytes after frame 0's value", ErrDecode)
	}
	return v, nil
}

// decodeValueBytes decodes one msgpack value without blob resolution.
func decodeValueBytes(b []byte) (any, error) {
	return Decode([][]byte{b})
}

type decoder struct {
	dec       *msgpack.Decoder
	frames    [][]byte
	remaining int
}

func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	c, err := d.dec.PeekCode()
	if err != nil {
		return nil, err
	}
	switch {
	case c == msgpcode.Nil:
		return nil, d.dec.DecodeNil()
	case c == msgpcode.True || c == msgpcode.False:
		return d.dec.DecodeBool()
	case msgpcode.IsFixedNum(c) || c == msgpcode.Int8 || c == msgpcode.Int16 ||
		c == msgpcode.Int32 || c == msgpcode.Int64 || c == msgpcode.Uint8 ||
		c == msgpcode.Uint16 || c == msgpcode.Uint32:
		return d.dec.DecodeInt64()
	case c == msgpcode.Uint64:
		u, err := d.dec.DecodeUint64()
		if err != nil {
			return nil, err
		}
		if u <= math.MaxInt64 {
			return int64(u), nil
		}
		return u, nil
	case c == msgpcode.Float || c == msgpcode.Double:
		return d.dec.DecodeFloat64()
	case msgpcode.IsString(c):
		return d.dec.DecodeString()
	case msgpcode.IsBin(c):
		return d.dec.DecodeBytes()
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		return d.array(depth)
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return d.mapValue(depth)
	default:
		return nil, fmt.Errorf("unsupported msgpack code 0x%02x (ext types are not used by distributed)", c)
	}
}

// capLen bounds a preallocation by the bytes left in the frame: every element
// takes at least one byte, so a header claiming 2^32 elements cannot make us
// allocate more than the frame itself.
func (d *decoder) capLen(n int) int {
	left := d.dec.Buffered().(*bytes.Reader).Len()
	if n > left {
		return left
	}
	return n
}

func (d *decoder) array(depth int) (any, error) {
	n, err := d.dec.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, nil
	}
	out := make([]any, 0, d.capLen(n))
	for i := 0; i < n; i++ {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, fmt.Errorf("array item %d: %w", i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func (d *decoder) mapValue(depth int) (any, error) {
	n, err := d.dec.DecodeMapLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, nil
	}
	m := &Map{Entries: make([]Entry, 0, d.capLen(n))}
	for i := 0; i < n; i++ {
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, fmt.Errorf("map key %d: %w", i, err)
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, fmt.Errorf("map value for %s: %w", String(k), err)
		}
		m.Entries = append(m.Entries, Entry{Key: k, Value: v})
	}
	return d.resolveMarker(m)
}

// resolveMarker mirrors distributed's object hook: positive __Serialized__ /
// __Pickled__ offsets become Blobs, __Set__ becomes a Set.
func (d *decoder) resolveMarker(m *Map) (any, error) {
	if len(m.Entries) > 3 || len(m.Entries) == 0 {
		return m, nil
	}
	if off, ok := m.Lookup("__Serialized__"); ok {
		if i, ok := off.(int64); ok && i > 0 {
			return d.blob(int(i), false)
		}
	}
	if off, ok := m.Lookup("__Pickled__"); ok {
		if i, ok := off.(int64); ok && i > 0 {
			return d.blob(int(i), true)
		}
	}
	if set, ok := m.Lookup("__Set__"); ok && set == true {
		items, _ := m.Lookup("as-list")
		switch x := items.(type) {
		case []any:
			return Set(x), nil
		case nil:
			return Set{}, nil
		default:
			return nil, fmt.Errorf("__Set__ as-list is %s, not a list", typeName(items))
		}
	}
	return m, nil
}

func (d *decoder) blob(offset int, pickled bool) (*Blob, error) {
	if offset >= len(d.frames) {
		return nil, fmt.Errorf("blob offset %d beyond the message's %d frames", offset, len(d.frames))
	}
	header := d.frames[offset]
	n, err := numSubFrames(header)
	if err != nil {
		return nil, fmt.Errorf("blob sub-header at frame %d: %w", offset, err)
	}
	if n > len(d.frames)-offset-1 {
		return nil, fmt.Errorf("blob at frame %d claims %d sub-frames, only %d frames follow",
			offset, n, len(d.frames)-offset-1)
	}
	return &Blob{Pickled: pickled, Header: header, Frames: d.frames[offset+1 : offset+1+n]}, nil
}

// numSubFrames reads "num-sub-frames" from a blob sub-header.
func numSubFrames(header []byte) (int, error) {
	v, err := decodeValueBytes(header)
	if err != nil {
		return 0, err
	}
	m, ok := v.(*Map)
	if !ok {
		return 0, fmt.Errorf("sub-header is %s, not a dict", typeName(v))
	}
	n, ok := m.Get("num-sub-frames").(int64)
	if !ok || n < 0 {
		return 0, errors.New(`sub-header lacks a valid "num-sub-frames"`)
	}
	return int(n), nil
}

// SubHeader decodes the blob's sub-header (for a Go-made blob, the header
// the encoder would write without compression).
func (b *Blob) SubHeader() (*Map, error) {
	if b.Header == nil {
		return b.goHeader(nil), nil
	}
	v, err := decodeValueBytes(b.Header)
	if err != nil {
		return nil, err
	}
	m, ok := v.(*Map)
	if !ok {
		return nil, fmt.Errorf("sub-header is %s, not a dict", typeName(v))
	}
	return m, nil
}

func (b *Blob) goHeader(compression []any) *Map {
	if compression == nil {
		compression = make([]any, len(b.Frames))
	}
	return NewMap("pickled-obj", b.pickledObj, "num-sub-frames", int64(len(b.Frames)), "compression", compression)
}
