package protocol

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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
	return Key(appendStr(make([]byte, 0, len(s)+5), s))
}

// KeyOf converts a decoded value into a Key, rejecting what dask's
// validate_key rejects (bytes, maps, None, bools...).
func KeyOf(v any) (Key, error) {
	switch x := v.(type) {
	case Key:
		return x, nil
	case string: // the common case: one allocation, no recursion
		return StrKey(x), nil
	}
	b, err := appendKey(make([]byte, 0, 32), v, 0)
	if err != nil {
		return "", err
	}
	return Key(b), nil
}

func appendKey(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxKeyDepth {
		return nil, fmt.Errorf("key nested deeper than %d", maxKeyDepth)
	}
	switch x := v.(type) {
	case string:
		return appendStr(b, x), nil
	case int64:
		return appendInt(b, x), nil
	case int:
		return appendInt(b, int64(x)), nil
	case uint64:
		return appendUint(b, x), nil
	case float64:
		return appendFloat64(b, x), nil
	case Key:
		return append(b, x...), nil
	case []any:
		b = appendArrayLen(b, len(x))
		for _, e := range x {
			var err error
			if b, err = appendKey(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	default:
		return nil, fmt.Errorf("invalid dask key of type %s: %s", typeName(v), String(v))
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
	writeKeyRepr(&b, v, false)
	return b.String()
}

// Repr renders the key as Python's repr() of it: ('x', 0), 'x', 3.
func (k Key) Repr() string {
	var b strings.Builder
	writeKeyRepr(&b, k.Value(), false)
	return b.String()
}

// ListString is Python's str() of the key as recursive_to_dict turns it
// into a dict key: the text for a str key, tuples as lists (['x', 0]), as
// a tuple key becomes a list and str() of that list names it.
func (k Key) ListString() string {
	v := k.Value()
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	writeKeyRepr(&b, v, true)
	return b.String()
}

func writeKeyRepr(b *strings.Builder, v any, lists bool) {
	switch x := v.(type) {
	case string:
		b.WriteString(pyStrRepr(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case uint64:
		b.WriteString(strconv.FormatUint(x, 10))
	case float64:
		b.WriteString(pyFloatRepr(x))
	case []any:
		open, end := byte('('), byte(')')
		if lists {
			open, end = '[', ']'
		}
		b.WriteByte(open)
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeKeyRepr(b, e, lists)
		}
		if len(x) == 1 && !lists {
			b.WriteByte(',')
		}
		b.WriteByte(end)
	default:
		b.WriteString(String(v))
	}
}

// pyStrRepr is Python's repr() of a str: single quotes unless the text has
// a single quote and no double quote; backslash escapes for the quote,
// backslash, \t \n \r and non-printable characters.
func pyStrRepr(s string) string { return string(appendPyStrRepr(nil, s)) }

func appendPyStrRepr(b []byte, s string) []byte {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b = append(b, quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0x100 && !unicode.IsPrint(r)):
			b = fmt.Appendf(b, `\x%02x`, r)
		case !unicode.IsPrint(r):
			if r < 0x10000 {
				b = fmt.Appendf(b, `\u%04x`, r)
			} else {
				b = fmt.Appendf(b, `\U%08x`, r)
			}
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, quote)
}

// StrText is the text of a plain str key, sliced from its msgpack (whose
// bytes, for such a key, are the msgpack of that str); ok is false for
// any other key.
func (k Key) StrText() (text string, ok bool) {
	if len(k) == 0 {
		return "", false
	}
	switch c := k[0]; {
	case c >= 0xa0 && c <= 0xbf && len(k) == 1+int(c-0xa0):
		return string(k[1:]), true
	case c == 0xd9 && len(k) >= 2 && len(k) == 2+int(k[1]):
		return string(k[2:]), true
	case c == 0xda && len(k) >= 3 && len(k) == 3+(int(k[1])<<8|int(k[2])):
		return string(k[3:]), true
	case c == 0xdb && len(k) >= 5 && len(k) == 5+(int(k[1])<<24|int(k[2])<<16|int(k[3])<<8|int(k[4])):
		return string(k[5:]), true
	}
	return "", false
}

// AppendRepr appends repr(key) to b, without allocating for a str key.
func (k Key) AppendRepr(b []byte) []byte {
	if s, ok := k.StrText(); ok {
		return appendPyStrRepr(b, s)
	}
	return append(b, k.Repr()...)
}

// FloatRepr is Python's repr() of a float: 1.0, 1e-05, 1e+16, inf.
func FloatRepr(f float64) string { return pyFloatRepr(f) }

// pyFloatRepr is Python's repr() of a float: the shortest round-tripping
// digits, positional for exponents -4 <= e < 16, else scientific with at
// least two exponent digits (1e+16, 1e-05).
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expS, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expS)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s = strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
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
