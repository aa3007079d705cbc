package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// EncodeOptions are per-connection settings for Encode.
type EncodeOptions struct {
	// Compression is the codec negotiated in the handshake ("lz4" or "").
	// It applies only to sub-frames of blobs Go makes itself (NewPickled);
	// relayed blobs keep their bytes and their sub-header's compression list.
	Compression string
}

// Encode turns a value tree into the frames of one message: frame 0 is the
// msgpack of msg with every Blob replaced by a {"__Serialized__"/"__Pickled__": i}
// marker, and the blobs' sub-headers and sub-frames follow in order. Offsets
// are numbered afresh, so blobs decoded from several messages can be relayed
// together in one batch.
//
// Besides the value tree types, Encode accepts: int, int32, uint32, float32,
// Key, Raw, []string, []Key, []int64, []float64, []*Map, map[string]any
// (written with sorted keys), map[Key]any, map[Key][]string, map[Key]int64,
// map[string]int64, and *KeyList[[]string] and *KeyList[int64] (written as
// those two maps are).
func Encode(msg any, opts *EncodeOptions) ([][]byte, error) {
	e := encoder{frames: make([][]byte, 1, 4)}
	if opts != nil {
		e.opts = *opts
	}
	e.b = make([]byte, 0, 256) // one small allocation covers most op dicts
	if err := e.value(msg, 0); err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	e.frames[0] = e.b
	return e.frames, nil
}

// Encoder is Encode for a connection's writer: it keeps its buffers (frame
// 0, the Go-made blobs' sub-headers, the frame list) from one message to
// the next, so a stream of compute-tasks does not grow and drop new ones
// for every message (that was about a third of what a 20k-task map
// allocated). The frames Encode returns alias those buffers: they are
// valid until the next Encode or Release. Not safe for concurrent use.
type Encoder struct {
	Compression string
	e           encoder
}

// Encode encodes msg as the package's Encode does, into the reused buffers.
func (enc *Encoder) Encode(msg any) ([][]byte, error) {
	e := &enc.e
	e.opts.Compression = enc.Compression
	clear(e.frames)
	e.frames = append(e.frames[:0], nil)
	e.b, e.side = e.b[:0], e.side[:0]
	if err := e.value(msg, 0); err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	e.frames[0] = e.b
	return e.frames, nil
}

// Release drops the last message's references to its blobs' frames (they
// may be large) and any buffer one unusually large message grew, once the
// frames are written.
func (enc *Encoder) Release() {
	e := &enc.e
	clear(e.frames)
	if cap(e.b) > maxKeptBuffer {
		e.b = nil
	}
	if cap(e.side) > maxKeptBuffer {
		e.side = nil
	}
	if cap(e.frames) > maxKeptBuffer/8 {
		e.frames = nil
	}
}

// maxKeptBuffer bounds what an Encoder keeps between messages.
const maxKeptBuffer = 64 << 10

// encoder appends msgpack to b and collects blob frames after frame 0.
// Go-made blobs' sub-headers are appended to side, each frame a slice of
// it (an append that moves side leaves the earlier slices on the old
// array, which they keep alive).
type encoder struct {
	b      []byte
	side   []byte
	frames [][]byte
	opts   EncodeOptions
}

func (e *encoder) value(v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	switch x := v.(type) {
	case nil:
		e.b = appendNil(e.b)
	case bool:
		e.b = appendBool(e.b, x)
	case int64:
		e.b = appendInt(e.b, x)
	case int:
		e.b = appendInt(e.b, int64(x))
	case int32:
		e.b = appendInt(e.b, int64(x))
	case uint32:
		e.b = appendUint(e.b, uint64(x))
	case uint64:
		e.b = appendUint(e.b, x)
	case float64:
		e.b = appendFloat64(e.b, x)
	case float32:
		e.b = appendFloat64(e.b, float64(x))
	case string:
		e.b = appendStr(e.b, x)
	case []byte:
		e.b = appendBin(e.b, x)
	case Key:
		e.b = append(e.b, x...) // a Key is already canonical msgpack
	case Raw:
		e.b = append(e.b, x...)
	case []any:
		e.b = appendArrayLen(e.b, len(x))
		for _, it := range x {
			if err := e.value(it, depth+1); err != nil {
				return err
			}
		}
	case *Map:
		return e.mapValue(x, depth)
	case Set:
		// distributed's msgpack_encode_default: {"__Set__": True, "as-list": [...]}
		e.b = appendStr(appendMapLen(e.b, 2), "__Set__")
		e.b = appendStr(appendBool(e.b, true), "as-list")
		return e.value([]any(x), depth+1)
	case *Blob:
		return e.blob(x)
	default:
		return e.typed(v, depth)
	}
	return nil
}

func (e *encoder) mapValue(m *Map, depth int) error {
	if m == nil {
		e.b = appendNil(e.b)
		return nil
	}
	e.b = appendMapLen(e.b, len(m.Entries))
	for _, en := range m.Entries {
		if err := e.value(en.Key, depth+1); err != nil {
			return err
		}
		if err := e.value(en.Value, depth+1); err != nil {
			return fmt.Errorf("value of %s: %w", String(en.Key), err)
		}
	}
	return nil
}

// typed handles the convenience types the scheduler builds messages from.
func (e *encoder) typed(v any, depth int) error {
	switch x := v.(type) {
	case []string:
		e.b = appendArrayLen(e.b, len(x))
		for _, s := range x {
			e.b = appendStr(e.b, s)
		}
	case []Key:
		e.b = appendArrayLen(e.b, len(x))
		for _, k := range x {
			e.b = append(e.b, k...)
		}
	case []int64:
		e.b = appendArrayLen(e.b, len(x))
		for _, n := range x {
			e.b = appendInt(e.b, n)
		}
	case []float64:
		e.b = appendArrayLen(e.b, len(x))
		for _, f := range x {
			e.b = appendFloat64(e.b, f)
		}
	case []*Map:
		e.b = appendArrayLen(e.b, len(x))
		for _, m := range x {
			if err := e.mapValue(m, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		e.b = appendMapLen(e.b, len(x))
		for _, k := range sortedNames(x) {
			e.b = appendStr(e.b, k)
			if err := e.value(x[k], depth+1); err != nil {
				return fmt.Errorf("value of %q: %w", k, err)
			}
		}
	case map[string]int64:
		e.b = appendMapLen(e.b, len(x))
		for _, k := range sortedNames(x) {
			e.b = appendInt(appendStr(e.b, k), x[k])
		}
	case map[Key]any:
		e.b = appendMapLen(e.b, len(x))
		for _, k := range sortedKeys(x) {
			e.b = append(e.b, k...)
			if err := e.value(x[k], depth+1); err != nil {
				return fmt.Errorf("value of %s: %w", k, err)
			}
		}
	case map[Key][]string:
		e.b = appendMapLen(e.b, len(x))
		for _, k := range sortedKeys(x) {
			e.b = append(e.b, k...)
			if err := e.typed(x[k], depth+1); err != nil {
				return err
			}
		}
	case map[Key]int64:
		e.b = appendMapLen(e.b, len(x))
		for _, k := range sortedKeys(x) {
			e.b = appendInt(append(e.b, k...), x[k])
		}
	case *KeyList[[]string]: // already in key order (keylist.go)
		e.b = appendMapLen(e.b, x.Len())
		for _, it := range x.items() {
			e.b = append(e.b, it.Key...)
			if err := e.typed(it.Value, depth+1); err != nil {
				return err
			}
		}
	case *KeyList[int64]:
		e.b = appendMapLen(e.b, x.Len())
		for _, it := range x.items() {
			e.b = appendInt(append(e.b, it.Key...), it.Value)
		}
	default:
		return fmt.Errorf("cannot encode Go type %T", v)
	}
	return nil
}

// sortedKeys and sortedNames make map output deterministic (tests compare bytes).
func sortedKeys[V any](m map[Key]V) []Key {
	ks := make([]Key, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func sortedNames[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (e *encoder) blob(b *Blob) error {
	marker := "__Serialized__"
	if b.Pickled {
		marker = "__Pickled__"
	}
	offset := len(e.frames)
	if b.Header != nil {
		e.frames = append(e.frames, b.Header)
		e.frames = append(e.frames, b.Frames...)
	} else {
		start := len(e.side)
		var frames [][]byte
		e.side, frames = b.appendGoMade(e.side, e.opts.Compression)
		e.frames = append(e.frames, e.side[start:len(e.side):len(e.side)])
		e.frames = append(e.frames, frames...)
	}
	e.b = appendInt(appendStr(appendMapLen(e.b, 1), marker), int64(offset))
	return nil
}

// appendGoMade appends to dst the sub-header of a Go-made blob (NewPickled,
// NewSerialized), compressing each sub-frame that has no codec yet with codec,
// as distributed's dumps._inplace_compress_frames does. Key order follows
// Python's: the payload's own keys, then "compression", then "num-sub-frames".
func (b *Blob) appendGoMade(dst []byte, codec string) ([]byte, [][]byte) {
	frames := b.Frames
	var compression []any
	if b.goHeaderMap != nil {
		compression, _ = b.goHeaderMap.Get("compression").([]any)
	}
	if len(compression) != len(frames) {
		compression = make([]any, len(frames))
	}
	if codec != "" {
		frames = make([][]byte, len(b.Frames))
		compression = append([]any(nil), compression...)
		for i, f := range b.Frames {
			frames[i] = f
			if compression[i] != nil {
				continue
			}
			if name, out := MaybeCompress(f, codec); name != "" {
				frames[i], compression[i] = out, name
			}
		}
	}
	if b.Pickled && namesOrNil(compression) { // run_specs: written without building a Map
		dst = appendStr(appendMapLen(dst, 3), "pickled-obj")
		if b.pickleBy != nil {
			dst = appendPickleBy(dst, b.pickleBy)
		} else {
			dst = appendBin(dst, b.pickledObj)
		}
		dst = appendStr(dst, "compression")
		dst = appendArrayLen(dst, len(compression))
		for _, c := range compression {
			if name, ok := c.(string); ok {
				dst = appendStr(dst, name)
			} else {
				dst = appendNil(dst)
			}
		}
		return appendInt(appendStr(dst, "num-sub-frames"), int64(len(frames))), frames
	}
	sub := encoder{b: dst} // header values are plain Go types: encoding cannot fail
	_ = sub.mapValue(b.goHeader(compression), 0)
	return sub.b, frames
}

// appendPickleBy appends w's pickle as msgpack bin, written in place: the
// header is reserved at its largest (bin 32) and, for a pickle that fits a
// smaller one, the bytes move back over the spare header bytes, so that the
// encoding is the minimal one msgpack writers (and appendBin) produce.
func appendPickleBy(dst []byte, w PickleWriter) []byte {
	mark := len(dst)
	dst = w.AppendPickle(append(dst, 0xc6, 0, 0, 0, 0))
	n := len(dst) - mark - 5
	var hdr []byte
	switch {
	case n <= math.MaxUint8:
		hdr = []byte{0xc4, byte(n)}
	case n <= math.MaxUint16:
		hdr = []byte{0xc5, byte(n >> 8), byte(n)}
	default:
		binary.BigEndian.PutUint32(dst[mark+1:], uint32(n))
		return dst
	}
	copy(dst[mark:], hdr)
	copy(dst[mark+len(hdr):], dst[mark+5:])
	return dst[:mark+len(hdr)+n]
}

// namesOrNil reports whether a compression list holds only codec names and
// None, what appendGoMade's direct path writes.
func namesOrNil(compression []any) bool {
	for _, c := range compression {
		if _, ok := c.(string); !ok && c != nil {
			return false
		}
	}
	return true
}
