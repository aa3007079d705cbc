package protocol

import (
	"bytes"
	"fmt"
	"math"
	"sort"

	"github.com/vmihailenco/msgpack/v5"
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
// map[string]int64.
func Encode(msg any, opts *EncodeOptions) ([][]byte, error) {
	e := encoder{frames: [][]byte{nil}}
	if opts != nil {
		e.opts = *opts
	}
	e.enc = msgpack.NewEncoder(&e.buf)
	if err := e.value(msg, 0); err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	e.frames[0] = e.buf.Bytes()
	return e.frames, nil
}

type encoder struct {
	buf    bytes.Buffer
	enc    *msgpack.Encoder
	frames [][]byte
	opts   EncodeOptions
}

func (e *encoder) value(v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	enc := e.enc
	switch x := v.(type) {
	case nil:
		return enc.EncodeNil()
	case bool:
		return enc.EncodeBool(x)
	case int64:
		return enc.EncodeInt(x)
	case int:
		return enc.EncodeInt(int64(x))
	case int32:
		return enc.EncodeInt(int64(x))
	case uint32:
		return enc.EncodeUint(uint64(x))
	case uint64:
		if x <= math.MaxInt64 {
			return enc.EncodeInt(int64(x))
		}
		return enc.EncodeUint(x)
	case float64:
		return enc.EncodeFloat64(x)
	case float32:
		return enc.EncodeFloat64(float64(x))
	case string:
		return enc.EncodeString(x)
	case []byte:
		return enc.EncodeBytes(x)
	case Key:
		_, err := e.buf.WriteString(string(x))
		return err
	case Raw:
		_, err := e.buf.Write(x)
		return err
	case []any:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, it := range x {
			if err := e.value(it, depth+1); err != nil {
				return err
			}
		}
		return nil
	case *Map:
		return e.mapValue(x, depth)
	case Set:
		return e.value(NewMap("__Set__", true, "as-list", []any(x)), depth)
	case *Blob:
		return e.blob(x)
	default:
		return e.typed(v, depth)
	}
}

func (e *encoder) mapValue(m *Map, depth int) error {
	if m == nil {
		return e.enc.EncodeNil()
	}
	if err := e.enc.EncodeMapLen(len(m.Entries)); err != nil {
		return err
	}
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
	enc := e.enc
	switch x := v.(type) {
	case []string:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, s := range x {
			if err := enc.EncodeString(s); err != nil {
				return err
			}
		}
		return nil
	case []Key:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, k := range x {
			e.buf.WriteString(string(k))
		}
		return nil
	case []int64:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, n := range x {
			if err := enc.EncodeInt(n); err != nil {
				return err
			}
		}
		return nil
	case []float64:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, f := range x {
			if err := enc.EncodeFloat64(f); err != nil {
				return err
			}
		}
		return nil
	case []*Map:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, m := range x {
			if err := e.mapValue(m, depth+1); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		sort.Strings(names)
		if err := enc.EncodeMapLen(len(x)); err != nil {
			return err
		}
		for _, k := range names {
			if err := enc.EncodeString(k); err != nil {
				return err
			}
			if err := e.value(x[k], depth+1); err != nil {
				return fmt.Errorf("value of %q: %w", k, err)
			}
		}
		return nil
	case map[string]int64:
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		sort.Strings(names)
		if err := enc.EncodeMapLen(len(x)); err != nil {
			return err
		}
		for _, k := range names {
			if err := enc.EncodeString(k); err != nil {
				return err
			}
			if err := enc.EncodeInt(x[k]); err != nil {
				return err
			}
		}
		return nil
	case map[Key]any:
		if err := enc.EncodeMapLen(len(x)); err != nil {
			return err
		}
		for _, k := range sortedKeys(x) {
			e.buf.WriteString(string(k))
			if err := e.value(x[k], depth+1); err != nil {
				return err
			}
		}
		return nil
	case map[Key][]string:
		if err := enc.EncodeMapLen(len(x)); err != nil {
			return err
		}
		for _, k := range sortedKeys(x) {
			e.buf.WriteString(string(k))
			if err := e.typed(x[k], depth+1); err != nil {
				return err
			}
		}
		return nil
	case map[Key]int64:
		if err := enc.EncodeMapLen(len(x)); err != nil {
			return err
		}
		for _, k := range sortedKeys(x) {
			e.buf.WriteString(string(k))
			if err := enc.EncodeInt(x[k]); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("cannot encode Go type %T", v)
	}
}

// sortedKeys makes map output deterministic (tests compare bytes).
func sortedKeys[V any](m map[Key]V) []Key {
	ks := make([]Key, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
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
		header, frames, err := b.encodeGoMade(e.opts.Compression)
		if err != nil {
			return err
		}
		e.frames = append(e.frames, header)
		e.frames = append(e.frames, frames...)
	}
	if err := e.enc.EncodeMapLen(1); err != nil {
		return err
	}
	if err := e.enc.EncodeString(marker); err != nil {
		return err
	}
	return e.enc.EncodeInt(int64(offset))
}

// encodeGoMade writes the sub-header of a Go-made Pickled blob, compressing
// its buffers with codec the way distributed's maybe_compress would.
func (b *Blob) encodeGoMade(codec string) ([]byte, [][]byte, error) {
	frames := b.Frames
	compression := make([]any, len(frames))
	if codec != "" {
		frames = make([][]byte, len(b.Frames))
		for i, f := range b.Frames {
			name, out := MaybeCompress(f, codec)
			frames[i] = out
			if name != "" {
				compression[i] = name
			}
		}
	}
	header, err := Encode(b.goHeader(compression), nil)
	if err != nil {
		return nil, nil, err
	}
	return header[0], frames, nil
}
