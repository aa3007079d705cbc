package order

import (
	"strconv"

	"daskgo/protocol"
)

// Python's str(key), needed by sort_key's last element. protocol.Key.String
// renders any key the way Python does, but decodes it into values first;
// sort keys need the text of nearly every node of a big graph, so the
// common shapes (str keys, tuples of ASCII names and ints) are rendered here
// straight from the msgpack bytes, and everything else (floats, non-ASCII
// or escaped text) goes through protocol.Key.String.
//
// Known divergence, inherited from protocol.Key.String: it decides what is
// printable with Go's Unicode tables (15.0) where CPython 3.11 uses 14.0,
// so a str inside a tuple key holding a character new in Unicode 15 (say
// U+1F6DC) is shown raw here and \U-escaped by Python. Only ties on the
// other four sort_key parts between such keys could order differently.

// keyTexts is str() of every node in one arena: node k's text is
// arena[off[k]:off[k+1]].
type keyTexts struct {
	arena string
	off   []uint32
}

func newKeyTexts(keys []protocol.Key) keyTexts {
	size := 0
	for _, k := range keys {
		size += len(k) + 8
	}
	buf := make([]byte, 0, size)
	off := make([]uint32, 1, len(keys)+1)
	for _, k := range keys {
		buf = appendKeyStr(buf, string(k))
		off = append(off, uint32(len(buf)))
	}
	return keyTexts{arena: string(buf), off: off}
}

func (t *keyTexts) of(k int32) string { return t.arena[t.off[k]:t.off[k+1]] }

// appendKeyStr appends str(key) for a Key's msgpack encoding.
func appendKeyStr(dst []byte, b string) []byte {
	if s, ok := strPayload(b); ok {
		return append(dst, s...) // str(a str) is its text
	}
	if out, rest, ok := appendRepr(dst, b, 0); ok && rest == "" {
		return out
	}
	return append(dst, protocol.Key(b).String()...)
}

// strPayload returns the text of a msgpack str that is all of b.
func strPayload(b string) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	c := b[0]
	n, hdr := -1, 0
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n, hdr = int(c&0x1f), 1
	case c == 0xd9 && len(b) >= 2:
		n, hdr = int(b[1]), 2
	case c == 0xda && len(b) >= 3:
		n, hdr = int(b[1])<<8|int(b[2]), 3
	case c == 0xdb && len(b) >= 5:
		n, hdr = int(b[1])<<24|int(b[2])<<16|int(b[3])<<8|int(b[4]), 5
	}
	if n < 0 || hdr+n != len(b) {
		return "", false
	}
	return b[hdr:], true
}

// appendRepr appends repr() of the msgpack value at the start of b for the
// shapes it knows (ints, plain ASCII str, tuples of those); ok is false for
// anything else, and the caller falls back to protocol.Key.String.
func appendRepr(dst []byte, b string, depth int) (out []byte, rest string, ok bool) {
	if len(b) == 0 || depth > 16 {
		return dst, b, false
	}
	c := b[0]
	switch {
	case c <= 0x7f:
		return strconv.AppendUint(dst, uint64(c), 10), b[1:], true
	case c >= 0xe0:
		return strconv.AppendInt(dst, int64(int8(c)), 10), b[1:], true
	case c >= 0xa0 && c <= 0xbf:
		return appendStrRepr(dst, b[1:], int(c&0x1f))
	case c >= 0x90 && c <= 0x9f:
		return appendTupleRepr(dst, b[1:], int(c&0x0f), depth)
	}
	size := payloadSize(c)
	if size == 0 || len(b) < 1+size {
		return dst, b, false
	}
	var n uint64
	for i := 1; i <= size; i++ {
		n = n<<8 | uint64(b[i])
	}
	rest = b[1+size:]
	switch c {
	case 0xcc, 0xcd, 0xce, 0xcf:
		return strconv.AppendUint(dst, n, 10), rest, true
	case 0xd0:
		return strconv.AppendInt(dst, int64(int8(n)), 10), rest, true
	case 0xd1:
		return strconv.AppendInt(dst, int64(int16(n)), 10), rest, true
	case 0xd2:
		return strconv.AppendInt(dst, int64(int32(n)), 10), rest, true
	case 0xd3:
		return strconv.AppendInt(dst, int64(n), 10), rest, true
	case 0xd9, 0xda, 0xdb:
		return appendStrRepr(dst, rest, int(n))
	case 0xdc, 0xdd:
		return appendTupleRepr(dst, rest, int(n), depth)
	}
	return dst, b, false // floats: protocol renders them
}

// appendStrRepr is repr() of printable ASCII text without quotes or
// backslashes: the text in single quotes.
func appendStrRepr(dst []byte, b string, n int) ([]byte, string, bool) {
	if n > len(b) {
		return dst, b, false
	}
	for i := 0; i < n; i++ {
		if c := b[i]; c < 0x20 || c > 0x7e || c == '\'' || c == '"' || c == '\\' {
			return dst, b, false
		}
	}
	dst = append(dst, '\'')
	dst = append(dst, b[:n]...)
	return append(dst, '\''), b[n:], true
}

func appendTupleRepr(dst []byte, b string, n, depth int) ([]byte, string, bool) {
	dst = append(dst, '(')
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		var ok bool
		if dst, b, ok = appendRepr(dst, b, depth+1); !ok {
			return dst, b, false
		}
	}
	if n == 1 {
		dst = append(dst, ',')
	}
	return append(dst, ')'), b, true
}
