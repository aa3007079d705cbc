package protocol

import (
	"fmt"
	"unsafe"
)

// Appenders for a caller that writes one large msgpack document piece by
// piece (the scheduler's cluster dump), instead of building its value tree
// first: each appends one msgpack item to b, as Encode writes it.

// AppendMapLen appends a map header of n entries.
func AppendMapLen(b []byte, n int) []byte { return appendMapLen(b, n) }

// AppendArrayLen appends an array header of n items.
func AppendArrayLen(b []byte, n int) []byte { return appendArrayLen(b, n) }

// AppendStr appends a str.
func AppendStr(b []byte, s string) []byte { return appendStr(b, s) }

// AppendStrBytes appends the text in s as a str.
func AppendStrBytes(b, s []byte) []byte {
	if len(s) == 0 {
		return appendStr(b, "")
	}
	return appendStr(b, unsafe.String(&s[0], len(s))) // appendStr copies it
}

// AppendBin appends a bin.
func AppendBin(b, v []byte) []byte { return appendBin(b, v) }

// AppendInt appends an int in its smallest form.
func AppendInt(b []byte, v int64) []byte { return appendInt(b, v) }

// AppendFloat64 appends a float64.
func AppendFloat64(b []byte, f float64) []byte { return appendFloat64(b, f) }

// AppendBool appends a bool.
func AppendBool(b []byte, v bool) []byte { return appendBool(b, v) }

// AppendNil appends nil.
func AppendNil(b []byte) []byte { return appendNil(b) }

// AppendValue appends a value tree as Encode writes it into frame 0. A
// value holding a Blob (which needs frames of its own) is an error.
func AppendValue(b []byte, v any) ([]byte, error) {
	var frame0 [1][]byte
	e := encoder{b: b, frames: frame0[:]}
	if err := e.value(v, 0); err != nil {
		return b, err
	}
	if len(e.frames) > 1 {
		return b, fmt.Errorf("cannot inline %s: it holds serialized data", String(v))
	}
	return e.b, nil
}
