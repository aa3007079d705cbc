package protocol

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// Key is a dask key (str, int, float, or a nested tuple of those) held as
// its canonical msgpack encoding. Using the encoding as the identity makes
// keys hashable (tuple keys can be Go map keys), cheap to compare, and
// re-emitted with exactly the msgpack types they arrived with: the client
// finds its futures by Python equality, so ("x", 1) must not come back as
// ("x", 1.0) or ["x", "1"].
//
// Canonical means what Python's msgpack writes: the smallest int form, str
// (never bin) for text, float64 for floats, arrays for tuples.
type Key string

// maxKeyDepth bounds tuple nesting; dask keys are at most a few levels deep.
const maxKeyDepth = 16

// StrKey is the Key of a plain string key such as "inc-1".
func StrKey(s string) Key {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	_ = enc.EncodeString(s)
	return Key(buf.String())
}

// KeyOf converts a decoded value into a Key, rejecting what dask's
// validate_key rejects (bytes, maps, None, bools...).
func KeyOf(v any) (Key, error) {
	if k, ok := v.(Key); ok {
		return k, nil
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := encodeKey(enc, v, 0); err != nil {
		return "", err
	}
	return Key(buf.String()), nil
}

func encodeKey(enc *msgpack.Encoder, v any, depth int) error {
	if depth > maxKeyDepth {
		return fmt.Errorf("key nested deeper than %d", maxKeyDepth)
	}
	switch x := v.(type) {
	case string:
		return enc.EncodeString(x)
	case int64:
		return enc.EncodeInt(x)
	case int:
		return enc.EncodeInt(int64(x))
	case uint64:
		return enc.EncodeUint(x)
	case float64:
		return enc.EncodeFloat64(x)
	case Key:
		return enc.Encode(Raw(x))
	case []any:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, e := range x {
			if err := encodeKey(enc, e, depth+1); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("invalid dask key of type %s: %s", typeName(v), String(v))
	}
}

// Value decodes the key back into the value tree form (string, int64,
// float64 or []any).
func (k Key) Value() any {
	v, err := decodeValueBytes([]byte(k))
	if err != nil {
		return nil
	}
	return v
}

// IsTuple reports whether the key is a tuple such as ("x-abc", 0, 1).
func (k Key) IsTuple() bool {
	if len(k) == 0 {
		return false
	}
	c := k[0]
	return (c >= 0x90 && c <= 0x9f) || c == 0xdc || c == 0xdd
}

// String renders the key as Python's str() of it would look: the bare text
// for str keys, a tuple repr for tuples.
func (k Key) String() string {
	v := k.Value()
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	writeKeyRepr(&b, v)
	return b.String()
}

func writeKeyRepr(b *strings.Builder, v any) {
	switch x := v.(type) {
	case string:
		b.WriteString("'" + strings.ReplaceAll(x, "'", "\\'") + "'")
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case uint64:
		b.WriteString(strconv.FormatUint(x, 10))
	case float64:
		b.WriteString(pyFloatRepr(x))
	case []any:
		b.WriteByte('(')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeKeyRepr(b, e)
		}
		if len(x) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	default:
		b.WriteString(String(v))
	}
}

func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

// KeysOf converts a decoded list of keys (an array, or a Set) into Keys.
func KeysOf(v any) ([]Key, error) {
	var items []any
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []any:
		items = x
	case Set:
		items = x
	case []Key:
		return x, nil
	default:
		return nil, fmt.Errorf("expected a list of keys, got %s", typeName(v))
	}
	keys := make([]Key, 0, len(items))
	for i, it := range items {
		k, err := KeyOf(it)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int64, uint64, int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case []any:
		return "tuple"
	case *Map:
		return "dict"
	case Set:
		return "set"
	case *Blob:
		return "blob"
	default:
		return fmt.Sprintf("%T", v)
	}
}
