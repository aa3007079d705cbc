package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrDecode is wrapped by every error the message decoder returns for
// malformed peer input.
var ErrDecode = errors.New("protocol: malformed message")

// maxDepth bounds nesting so that a hostile message cannot blow the stack.
// Python's msgpack refuses deeper than 512 only by recursion limits; real
// messages nest fewer than 10 levels.
const maxDepth = 256

// Decode turns the frames of one message into its value tree (see value.go).
// Frame 0 is msgpack; {"__Serialized__": i} and {"__Pickled__": i} markers are
// resolved into Blobs that alias frames[i..]; {"__Set__": ...} becomes a Set.
// Blob frames are not copied: they share memory with frames. Strings and bin
// values are copies, so frame 0 may be reused once Decode returns.
func Decode(frames [][]byte) (any, error) {
	if len(frames) == 0 {
		return nil, fmt.Errorf("%w: message has no frames", ErrDecode)
	}
	// Frame 0 is the msgpack itself, never a blob's: no value aliases it
	// (ReadFramesReusing relies on that).
	d := decoder{buf: frames[0], frames: frames, nextFree: 1}
	v, err := d.value(0)
	if err != nil {
		return nil, fmt.Errorf("%w: frame 0: %v", ErrDecode, err)
	}
	if d.pos != len(d.buf) {
		return nil, fmt.Errorf("%w: %d trailing bytes after frame 0's value", ErrDecode, len(d.buf)-d.pos)
	}
	return v, nil
}

// decodeValueBytes decodes one msgpack value without blob resolution.
func decodeValueBytes(b []byte) (any, error) {
	d := decoder{buf: b}
	v, err := d.value(0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecode, err)
	}
	if d.pos != len(b) {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrDecode, len(b)-d.pos)
	}
	return v, nil
}

// interned holds the field names and values that make up most of every
// op dict, already boxed in an interface: decoding them costs no string
// allocation and no convTstring (about a third of Decode's allocations).
var interned = func() map[string]any {
	names := []string{
		"op", "key", "keys", "reply", "status", "OK", "error", "stimulus_id", "priority",
		"duration", "who_has", "nbytes", "run_spec", "resource_restrictions", "actor",
		"annotations", "span_id", "run_id", "compute-task", "task-finished", "task-erred",
		"free-keys", "release-worker-data", "add-keys", "keep-alive", "close-stream",
		"heartbeat_worker", "update-graph", "key-in-memory", "type", "typename", "metadata",
		"thread", "startstops", "action", "start", "stop", "compute", "transfer", "worker",
		"client", "address", "now", "metrics", "executing", "extensions", "time", "memory",
		"serializer", "pickle", "writeable", "num-sub-frames", "split-num-sub-frames",
		"split-offsets", "compression", "pickled-obj", "__Serialized__", "__Pickled__",
		"__Set__", "as-list", "sub-header", "type-serialized", "dask", "data", "exception",
		"traceback", "exception_text", "traceback_text", "uncaught-error", "lz4", "",
		// the task kinds of the helper's graph chunks (compat/helper_wire.py)
		"Task", "Alias", "DataNode", "List", "Dict",
	}
	m := make(map[string]any, len(names))
	for _, n := range names {
		m[n] = n
	}
	return m
}()

const maxInternLen = 24

// lookupInterned returns the interned value of the str b, if it is one
// (the map lookup by string(b) does not allocate).
func lookupInterned(b []byte) (any, bool) {
	if len(b) > maxInternLen {
		return nil, false
	}
	v, ok := interned[string(b)]
	return v, ok
}

// decoder is a byte-level msgpack reader over one frame. Every length read
// from the wire is checked against the bytes left before anything is
// allocated for it (the nats-server parser rule: never trust a length).
// frames == nil means markers are not resolved (sub-headers, keys).
type decoder struct {
	buf    []byte
	pos    int
	frames [][]byte
	// nextFree is the first frame no blob has claimed yet. distributed's
	// dumps numbers blobs in the order msgpack meets them, so offsets only
	// grow and ranges never overlap; refusing anything else stops a 1 MiB
	// message of repeated {"__Pickled__": 1} markers from turning into
	// 75 000 references to the same frames (and 75 000 copies on relay).
	nextFree int64
}

var errTruncated = errors.New("truncated msgpack")

func (d *decoder) left() int { return len(d.buf) - d.pos }

// take returns the next n bytes (a view into buf).
func (d *decoder) take(n int) ([]byte, error) {
	if n < 0 || n > d.left() {
		return nil, fmt.Errorf("%w: need %d bytes at offset %d, have %d", errTruncated, n, d.pos, d.left())
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

// size reads a big-endian length of width 1, 2 or 4 bytes.
func (d *decoder) size(width int) (int, error) {
	b, err := d.take(width)
	if err != nil {
		return 0, err
	}
	switch width {
	case 1:
		return int(b[0]), nil
	case 2:
		return int(binary.BigEndian.Uint16(b)), nil
	default:
		return int(binary.BigEndian.Uint32(b)), nil
	}
}

// header reads one type code and classifies it. For str/bin/array/map it
// also returns the length, already checked against the remaining bytes
// (arrays need >= 1 byte per item, maps >= 2 per entry).
func (d *decoder) header() (kind byte, n int, err error) {
	if d.pos >= len(d.buf) {
		return 0, 0, fmt.Errorf("%w: value expected at offset %d", errTruncated, d.pos)
	}
	c := d.buf[d.pos]
	d.pos++
	switch {
	case c <= 0x7f || c >= 0xe0:
		return 'i', int(c), nil
	case c <= 0x8f:
		n = int(c & 0x0f)
		kind = 'm'
	case c <= 0x9f:
		n = int(c & 0x0f)
		kind = 'a'
	case c <= 0xbf:
		n = int(c & 0x1f)
		kind = 's'
	default:
		kind, n, err = d.sizedHeader(c)
		if err != nil || kind != 's' && kind != 'b' && kind != 'a' && kind != 'm' {
			return kind, n, err
		}
	}
	need := n
	if kind == 'm' {
		need = 2 * n
	}
	if need > d.left() {
		return 0, 0, fmt.Errorf("%w: %s of %d items/bytes at offset %d, only %d bytes left",
			errTruncated, kindName(kind), n, d.pos, d.left())
	}
	return kind, n, nil
}

func (d *decoder) sizedHeader(c byte) (byte, int, error) {
	var width int
	var kind byte
	switch c {
	case mpNil, mpFalse, mpTrue, mpFloat32, mpFloat64:
		return c, 0, nil
	case mpUint8, mpUint16, mpUint32, mpUint64, mpInt8, mpInt16, mpInt32, mpInt64:
		return 'i', int(c), nil
	case mpBin8, mpBin16, mpBin32:
		kind, width = 'b', 1<<(c-mpBin8)
	case mpStr8, mpStr16, mpStr32:
		kind, width = 's', 1<<(c-mpStr8)
	case mpArray16, mpArray32:
		kind, width = 'a', 2<<(c-mpArray16)
	case mpMap16, mpMap32:
		kind, width = 'm', 2<<(c-mpMap16)
	default:
		return 0, 0, fmt.Errorf("unsupported msgpack code 0x%02x at offset %d (distributed uses no ext types)", c, d.pos-1)
	}
	n, err := d.size(width)
	return kind, n, err
}

func kindName(k byte) string {
	switch k {
	case 's':
		return "str"
	case 'b':
		return "bin"
	case 'a':
		return "array"
	default:
		return "map"
	}
}

// integer finishes an int whose code header() returned as n.
func (d *decoder) integer(c int) (any, error) {
	if c <= 0x7f || c >= 0xe0 {
		return fixint(c), nil
	}
	u, width, err := d.intBits(c)
	if err != nil {
		return nil, err
	}
	if c <= mpUint64 {
		if u > math.MaxInt64 {
			return u, nil
		}
		return int64(u), nil
	}
	return signExtend(u, width), nil
}

// fixint is the value of a positive or negative fixint code.
func fixint(c int) int64 {
	if c <= 0x7f {
		return int64(c)
	}
	return int64(int8(c))
}

// intBits reads the big-endian payload of a uint8..int64 code.
func (d *decoder) intBits(c int) (u uint64, width int, err error) {
	width = 1 << ((c - mpUint8) & 3)
	b, err := d.take(width)
	if err != nil {
		return 0, 0, err
	}
	switch width {
	case 1:
		u = uint64(b[0])
	case 2:
		u = uint64(binary.BigEndian.Uint16(b))
	case 4:
		u = uint64(binary.BigEndian.Uint32(b))
	default:
		u = binary.BigEndian.Uint64(b)
	}
	return u, width, nil
}

// signExtend reads width bytes' worth of u as a signed int8..int64.
func signExtend(u uint64, width int) int64 {
	switch width {
	case 1:
		return int64(int8(u))
	case 2:
		return int64(int16(u))
	case 4:
		return int64(int32(u))
	}
	return int64(u)
}

func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	kind, n, err := d.header()
	if err != nil {
		return nil, err
	}
	switch kind {
	case 'i':
		return d.integer(n)
	case mpNil:
		return nil, nil
	case mpTrue:
		return true, nil
	case mpFalse:
		return false, nil
	case mpFloat32:
		b, err := d.take(4)
		if err != nil {
			return nil, err
		}
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
	case mpFloat64:
		b, err := d.take(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	case 's':
		b, _ := d.take(n) // length checked by header
		if v, ok := lookupInterned(b); ok {
			return v, nil
		}
		return string(b), nil
	case 'b':
		b, _ := d.take(n)
		return append([]byte(nil), b...), nil
	case 'a':
		return d.array(n, depth)
	default:
		return d.mapValue(n, depth)
	}
}

func (d *decoder) array(n, depth int) (any, error) {
	out := make([]any, n) // n <= bytes left: header checked it
	for i := range out {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, fmt.Errorf("array item %d: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

func (d *decoder) mapValue(n, depth int) (any, error) {
	m := &Map{Entries: make([]Entry, n)} // 2n <= bytes left: header checked it
	marker := false
	for i := range m.Entries {
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, fmt.Errorf("map key %d: %w", i, err)
		}
		if s, ok := k.(string); ok && len(s) > 2 && s[0] == '_' && s[1] == '_' {
			marker = true // only maps with a "__x" key can be markers
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, fmt.Errorf("map value for %s: %w", String(k), err)
		}
		m.Entries[i] = Entry{Key: k, Value: v}
	}
	if !marker || d.frames == nil {
		return m, nil
	}
	return d.resolveMarker(m)
}

// resolveMarker mirrors distributed/protocol/core.py: loads._decode_default
// and serialize.py: msgpack_decode_default, in their order: a positive
// __Serialized__ / __Pickled__ offset becomes a Blob (Python's bool True
// counts as 1), then any __Set__ key makes a set of "as-list". __Enum__ maps
// stay maps, which relays them unchanged.
func (d *decoder) resolveMarker(m *Map) (any, error) {
	if v, ok := m.Lookup("__Serialized__"); ok {
		off, isInt := markerOffset(v)
		if !isInt || off <= 0 {
			// Python then tries the legacy inline form Serialized(*obj["data"]).
			return nil, fmt.Errorf("__Serialized__ marker with value %s: only positive frame offsets are supported, not the inline form", String(v))
		}
		return d.blob(off, false)
	}
	if v, ok := m.Lookup("__Pickled__"); ok {
		off, isInt := markerOffset(v)
		if !isInt {
			return nil, fmt.Errorf("__Pickled__ marker with non-integer value %s", String(v))
		}
		if off > 0 {
			return d.blob(off, true)
		}
	}
	if _, ok := m.Lookup("__Set__"); ok {
		items, _ := m.Lookup("as-list")
		list, ok := items.([]any)
		if !ok {
			return nil, fmt.Errorf("__Set__ as-list is %s, not a list", typeName(items))
		}
		return Set(list), nil
	}
	return m, nil
}

// markerOffset reads a marker's offset the way Python compares it with 0.
func markerOffset(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case uint64:
		return math.MaxInt64, true // beyond any frame list: rejected by blob
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func (d *decoder) blob(offset int64, pickled bool) (*Blob, error) {
	if offset >= int64(len(d.frames)) {
		return nil, fmt.Errorf("blob offset %d beyond the message's %d frames", offset, len(d.frames))
	}
	if offset < 1 {
		return nil, fmt.Errorf("blob offset %d: frame 0 is the message's msgpack, not a blob", offset)
	}
	if offset < d.nextFree {
		return nil, fmt.Errorf("blob offset %d reuses frames already claimed by an earlier blob (next free frame %d)", offset, d.nextFree)
	}
	header := d.frames[offset]
	n, err := numSubFrames(header)
	if err != nil {
		return nil, fmt.Errorf("blob sub-header at frame %d: %w", offset, err)
	}
	if n > int64(len(d.frames))-offset-1 {
		return nil, fmt.Errorf("blob at frame %d claims %d sub-frames, only %d frames follow",
			offset, n, int64(len(d.frames))-offset-1)
	}
	first := int(offset) + 1
	d.nextFree = int64(first) + n
	// Cap the sub-slice so appending to Blob.Frames can never overwrite the
	// frames of the next blob.
	return &Blob{Pickled: pickled, Header: header, Frames: d.frames[first : first+int(n) : first+int(n)]}, nil
}

// numSubFrames reads "num-sub-frames" from a blob sub-header without
// building the map: other values (the pickle in pickled-obj, type-serialized)
// are only skipped, so resolving a blob costs no allocation.
func numSubFrames(header []byte) (int64, error) {
	d := decoder{buf: header}
	kind, n, err := d.header()
	if err != nil {
		return 0, err
	}
	if kind != 'm' {
		return 0, fmt.Errorf("sub-header is not a dict")
	}
	found := int64(-1)
	for i := 0; i < n; i++ {
		isKey, err := d.isStr("num-sub-frames")
		if err != nil {
			return 0, fmt.Errorf("map key %d: %w", i, err)
		}
		if !isKey {
			if err := d.skip(1); err != nil {
				return 0, err
			}
			continue
		}
		v, err := d.value(1)
		if err != nil {
			return 0, err
		}
		iv, ok := v.(int64)
		if !ok || iv < 0 {
			return 0, fmt.Errorf(`"num-sub-frames" is %s, not a non-negative int`, String(v))
		}
		found = iv
	}
	if d.pos != len(header) {
		return 0, fmt.Errorf("%d trailing bytes after the sub-header", len(header)-d.pos)
	}
	if found < 0 {
		return 0, errors.New(`sub-header lacks "num-sub-frames"`)
	}
	return found, nil
}

// isStr consumes one value and reports whether it is the string s.
func (d *decoder) isStr(s string) (bool, error) {
	start := d.pos
	kind, n, err := d.header()
	if err != nil {
		return false, err
	}
	if kind == 's' {
		b, _ := d.take(n)
		return string(b) == s, nil
	}
	d.pos = start
	return false, d.skip(1)
}

// skip consumes one value without building it.
func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	kind, n, err := d.header()
	if err != nil {
		return err
	}
	switch kind {
	case 'i':
		_, err = d.integer(n)
		return err
	case mpFloat32:
		_, err = d.take(4)
	case mpFloat64:
		_, err = d.take(8)
	case 's', 'b':
		_, err = d.take(n)
	case 'a', 'm':
		if kind == 'm' {
			n *= 2
		}
		for i := 0; i < n && err == nil; i++ {
			err = d.skip(depth + 1)
		}
	}
	return err
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

// goHeader is the sub-header of a Go-made blob with the given per-sub-frame
// codecs (nil: the codecs recorded at construction, none for NewPickled),
// keyed in the order distributed's dumps writes them.
func (b *Blob) goHeader(compression []any) *Map {
	n := int64(len(b.Frames))
	if b.Pickled {
		if compression == nil {
			compression = make([]any, n)
		}
		return NewMap("pickled-obj", b.pickle(), "compression", compression, "num-sub-frames", n)
	}
	h := &Map{Entries: slices.Clone(b.goHeaderMap.Entries)}
	if compression != nil {
		h.Set("compression", compression)
	}
	h.Set("num-sub-frames", n)
	return h
}
