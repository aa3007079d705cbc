package protocol

import (
	"fmt"
	"strconv"
	"strings"
)

// The decoded form of a message is a tree of these Go values, chosen so that
// everything distributed puts on the wire survives a decode/encode round trip
// byte for byte where it matters (keys, bin vs str, blobs):
//
//	msgpack nil          nil
//	bool                 bool
//	int (any width)      int64, or uint64 above math.MaxInt64
//	float32/float64      float64
//	str                  string
//	bin                  []byte
//	array                []any          (Python decodes arrays as tuples)
//	map                  *Map           (ordered; keys may be arrays, ints, ...)
//	{"__Set__": ...}     Set
//	{"__Serialized__":i} *Blob          (Pickled == false)
//	{"__Pickled__": i}   *Blob          (Pickled == true)
//
// The encoder also accepts Key and Raw (pre-encoded msgpack, written verbatim),
// and a few typed slices and maps for convenience (see Encode).

// Map is a msgpack map that keeps its entries in wire order. Keys are any
// decoded value: distributed sends maps keyed by tuples (dask keys) and by
// ints. Lookups by string name are linear, which is the right trade for the
// small op dicts that make up nearly all traffic.
type Map struct {
	Entries []Entry
}

// Entry is one key/value pair of a Map.
type Entry struct {
	Key   any
	Value any
}

// NewMap builds a Map from alternating string keys and values:
// NewMap("op", "free-keys", "keys", ks). It panics on an odd count or a
// non-string key, which is a programming error, never peer input.
func NewMap(kv ...any) *Map {
	if len(kv)%2 != 0 {
		panic("protocol.NewMap: odd number of arguments")
	}
	m := &Map{Entries: make([]Entry, 0, len(kv)/2)}
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			panic(fmt.Sprintf("protocol.NewMap: key %d is %T, not string", i/2, kv[i]))
		}
		m.Entries = append(m.Entries, Entry{Key: k, Value: kv[i+1]})
	}
	return m
}

// Lookup returns the value stored under the string key name.
func (m *Map) Lookup(name string) (any, bool) {
	if m == nil {
		return nil, false
	}
	for i := range m.Entries {
		if k, ok := m.Entries[i].Key.(string); ok && k == name {
			return m.Entries[i].Value, true
		}
	}
	return nil, false
}

// Get returns the value under name, or nil when absent.
func (m *Map) Get(name string) any {
	v, _ := m.Lookup(name)
	return v
}

// Set replaces the value under name, or appends the entry.
func (m *Map) Set(name string, v any) {
	for i := range m.Entries {
		if k, ok := m.Entries[i].Key.(string); ok && k == name {
			m.Entries[i].Value = v
			return
		}
	}
	m.Entries = append(m.Entries, Entry{Key: name, Value: v})
}

// Delete removes the entry under name and returns its value.
func (m *Map) Delete(name string) (any, bool) {
	for i := range m.Entries {
		if k, ok := m.Entries[i].Key.(string); ok && k == name {
			v := m.Entries[i].Value
			m.Entries = append(m.Entries[:i], m.Entries[i+1:]...)
			return v, true
		}
	}
	return nil, false
}

// Items returns the entries; nil-safe, so absent optional maps iterate as empty.
func (m *Map) Items() []Entry {
	if m == nil {
		return nil
	}
	return m.Entries
}

// Len is the number of entries.
func (m *Map) Len() int {
	if m == nil {
		return 0
	}
	return len(m.Entries)
}

// Set is distributed's set marker {"__Set__": true, "as-list": [...]}.
// Python decodes it into a set; the encoder writes it back as the marker.
type Set []any

// Blob is an opaque Serialize/Serialized (Pickled == false) or
// ToPickle/Pickled (Pickled == true) payload: a msgpack sub-header frame
// followed by its sub-frames. The scheduler never unpickles user data, so a
// relayed Blob keeps Header and Frames byte for byte; only its frame offset
// changes when it is re-encoded into another message.
//
// A Blob built by Go (NewPickled, NewSerialized) has a nil Header: the
// encoder writes the sub-header itself and may compress the sub-frames with
// the connection's negotiated codec, as distributed does for payloads it
// creates.
type Blob struct {
	Pickled bool
	Header  []byte
	Frames  [][]byte

	// pickledObj is the pickle for a Go-made Pickled blob (Header == nil);
	// pickleBy, when set instead, writes it at encoding time.
	pickledObj []byte
	pickleBy   PickleWriter
	// goHeaderMap is the sub-header of a Go-made Serialized blob, without
	// "num-sub-frames" (the encoder sets it).
	goHeaderMap *Map
}

// NewPickled makes a ToPickle payload from a pickle and its protocol-5
// out-of-band buffers.
func NewPickled(pickle []byte, buffers ...[]byte) *Blob {
	return &Blob{Pickled: true, pickledObj: pickle, Frames: buffers}
}

// BlobBytes is the payload size of the blobs among m's values (not nested
// deeper): what writing a message like a compute-task will copy, known
// without encoding it. A blob whose pickle is written at encoding time
// counts its PickleWriter's SizeHint when it has one.
func (m *Map) BlobBytes() int {
	n := 0
	for i := range m.Entries {
		if b, ok := m.Entries[i].Value.(*Blob); ok {
			n += b.sizeHint()
		}
	}
	return n
}

func (b *Blob) sizeHint() int {
	if b.pickleBy != nil {
		if h, ok := b.pickleBy.(interface{ SizeHint() int }); ok {
			return h.SizeHint()
		}
		return 0
	}
	n := len(b.Header) + len(b.pickledObj)
	for _, f := range b.Frames {
		n += len(f)
	}
	return n
}

// PickleWriter makes a Pickled blob's pickle when it is encoded, appending
// it to dst: a run_spec spliced from its spec and its graph's object table
// (compat.TaskSpec) is built by the goroutine that encodes the message (a
// stream's writer, off the engine's lock) and straight into the frame that
// carries it, not copied there from a buffer of its own. It must be safe
// to call from any goroutine, any number of times.
type PickleWriter interface {
	AppendPickle(dst []byte) []byte
}

// NewPickledBy makes a ToPickle payload whose pickle w writes when the blob
// is encoded.
func NewPickledBy(w PickleWriter) *Blob {
	return &Blob{Pickled: true, pickleBy: w}
}

// pickle is a Go-made Pickled blob's pickle (made now for a PickleWriter).
func (b *Blob) pickle() []byte {
	if b.pickleBy != nil {
		return b.pickleBy.AppendPickle(nil)
	}
	return b.pickledObj
}

// Size is the number of payload bytes the blob carries (header and frames).
func (b *Blob) Size() int {
	n := len(b.Header) + len(b.pickle())
	for _, f := range b.Frames {
		n += len(f)
	}
	return n
}

// Raw is msgpack that is already encoded; the encoder copies it verbatim.
type Raw []byte

// maxStringLen caps String's output: it goes into logs and errors, and a
// peer's message can hold megabytes.
const maxStringLen = 512

// String gives a readable form of a decoded value for logs and errors,
// truncated with "..." past maxStringLen bytes.
func String(v any) string {
	var b strings.Builder
	writeValue(&b, v)
	if b.Len() > maxStringLen {
		return b.String()[:maxStringLen] + "..."
	}
	return b.String()
}

// writeValue stops descending once the output is long enough, so rendering
// a 65 536-item array for an error message costs no more than a short one.
func writeValue(b *strings.Builder, v any) {
	if b.Len() > maxStringLen {
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case string:
		b.WriteString(strconv.Quote(x))
	case []byte:
		fmt.Fprintf(b, "b<%d bytes>", len(x))
	case Key:
		b.WriteString(x.String())
	case *Blob:
		if x.Pickled {
			fmt.Fprintf(b, "Pickled<%d bytes>", x.Size())
		} else {
			fmt.Fprintf(b, "Serialized<%d bytes>", x.Size())
		}
	case []any:
		b.WriteByte('(')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, e)
			if b.Len() > maxStringLen {
				break
			}
		}
		b.WriteByte(')')
	case *Map:
		if x == nil {
			b.WriteString("None")
			return
		}
		b.WriteByte('{')
		for i, e := range x.Entries {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, e.Key)
			b.WriteString(": ")
			writeValue(b, e.Value)
			if b.Len() > maxStringLen {
				break
			}
		}
		b.WriteByte('}')
	case Set:
		b.WriteString("set")
		writeValue(b, []any(x))
	default:
		fmt.Fprint(b, x)
	}
}
