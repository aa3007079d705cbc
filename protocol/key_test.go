package protocol

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func tup(items ...any) []any { return items }

// TestKeyOf checks canonical bytes (what Python's msgpack writes for the
// key), Value() round trip, and String() against Python's str(key), whose
// outputs below were taken from CPython 3.11.
func TestKeyOf(t *testing.T) {
	tests := []struct {
		in      any
		hex     string
		str     string
		isTuple bool
	}{
		{"inc-1", "a5696e632d31", "inc-1", false},
		{int64(5), "05", "5", false},
		{5, "05", "5", false},
		{int64(-7), "f9", "-7", false},
		{uint64(math.MaxUint64), "cfffffffffffffffff", "18446744073709551615", false},
		{2.5, "cb4004000000000000", "2.5", false},
		{tup("x", int64(0), int64(1)), "93a178" + "0001", "('x', 0, 1)", true},
		{tup("t"), "91a174", "('t',)", true},
		{tup("a'b"), "91a3612762", `("a'b",)`, true},
		{tup(`a"b`), "91a3612262", `('a"b',)`, true},
		{tup(`both'"`), "91a6626f7468" + "2722", `('both\'"',)`, true},
		{tup("x", 1.0), "92a178cb3ff0000000000000", "('x', 1.0)", true},
		{tup("x", 1e16), "", "('x', 1e+16)", true},
		{tup("x", 1e-5), "", "('x', 1e-05)", true},
		{tup("x", 0.0001), "", "('x', 0.0001)", true},
		{tup("x", 1e15), "", "('x', 1000000000000000.0)", true},
		{tup("x", 123456789012345678.0), "", "('x', 1.2345678901234568e+17)", true},
		{tup("x", 1.5e300), "", "('x', 1.5e+300)", true},
		{tup("x", 5e-324), "", "('x', 5e-324)", true},
		{tup("x", math.Copysign(0, -1)), "", "('x', -0.0)", true},
		{tup("x", math.Inf(1)), "", "('x', inf)", true},
		{tup("x", tup(int64(1), int64(2))), "92a178920102", "('x', (1, 2))", true},
		{tup("\n\t\\"), "", `('\n\t\\',)`, true},
		{tup("é\x7f\x00\u200b"), "", `('é\x7f\x00\u200b',)`, true},
		{tup("x", uint64(math.MaxUint64)), "", "('x', 18446744073709551615)", true},
		{tup(), "90", "()", true},
	}
	for _, tt := range tests {
		k, err := KeyOf(tt.in)
		if err != nil {
			t.Errorf("KeyOf(%#v): %v", tt.in, err)
			continue
		}
		if tt.hex != "" && hexs([]byte(k)) != tt.hex {
			t.Errorf("KeyOf(%#v) = %s, want %s", tt.in, hexs([]byte(k)), tt.hex)
		}
		if got := k.String(); got != tt.str {
			t.Errorf("KeyOf(%#v).String() = %s, want %s", tt.in, got, tt.str)
		}
		if k.IsTuple() != tt.isTuple {
			t.Errorf("KeyOf(%#v).IsTuple() = %v", tt.in, k.IsTuple())
		}
		if k2, err := KeyOf(k.Value()); err != nil || k2 != k {
			t.Errorf("KeyOf(Value()) of %s: %q %v", k, k2, err)
		}
		if enc := mustEncode(t, tt.in); Key(enc[0]) != k {
			t.Errorf("Encode(%#v) = %x, key bytes %x: a key must encode like its value", tt.in, enc[0], []byte(k))
		}
	}
	if StrKey("inc-1") != mustKey(t, "inc-1") {
		t.Error("StrKey differs from KeyOf for a str key")
	}
	if k := mustKey(t, mustKey(t, "a")); k != StrKey("a") {
		t.Error("KeyOf(Key) must be the identity")
	}
}

func mustKey(t *testing.T, v any) Key {
	t.Helper()
	k, err := KeyOf(v)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKeyOfRejects mirrors dask.core.validate_key: bytes, None, bools, dicts
// and sets are not keys, also inside tuples.
func TestKeyOfRejects(t *testing.T) {
	deep := any("x")
	for i := 0; i <= maxKeyDepth+1; i++ {
		deep = tup(deep)
	}
	for _, bad := range []any{
		[]byte("x"), nil, true, NewMap("a", int64(1)), Set{"a"}, &Blob{},
		tup("x", []byte("b")), tup("x", nil), tup(tup(false)), float32(1), deep,
	} {
		if k, err := KeyOf(bad); err == nil {
			t.Errorf("KeyOf(%s) = %s, want an error", String(bad), k)
		} else if !strings.Contains(err.Error(), "key") {
			t.Errorf("error should say what was wrong: %v", err)
		}
	}
}

func TestKeysOf(t *testing.T) {
	want := []Key{StrKey("a"), mustKey(t, tup("b", int64(1)))}
	for _, in := range []any{tup("a", tup("b", int64(1))), Set{"a", tup("b", int64(1))}, want} {
		got, err := KeysOf(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("KeysOf(%s) = %v, %v", String(in), got, err)
		}
	}
	if got, err := KeysOf(nil); got != nil || err != nil {
		t.Errorf("KeysOf(nil) = %v, %v", got, err)
	}
	if _, err := KeysOf("a"); err == nil {
		t.Error("KeysOf of a str must fail: a list was expected")
	}
	if _, err := KeysOf(tup("a", []byte("b"))); err == nil || !strings.Contains(err.Error(), "key 1") {
		t.Errorf("KeysOf must name the bad index: %v", err)
	}
}

// TestGoldenKeysRoundTrip: every key-shaped value in every recorded message
// (str, int, float, tuples of those) becomes a Key whose bytes occur in
// Python's frame 0 as written and whose Value() is the same tree.
func TestGoldenKeysRoundTrip(t *testing.T) {
	n := 0
	for _, v := range loadVectors(t) {
		frames := readVector(t, v)
		val, err := Decode(frames)
		if err != nil {
			t.Fatal(err)
		}
		frame0, seen := string(frames[0]), map[Key]bool{}
		walk(val, func(x any) {
			k, err := KeyOf(x)
			if err != nil || seen[k] {
				return
			}
			seen[k] = true
			n++
			if !strings.Contains(frame0, string(k)) {
				t.Fatalf("%s: key %s (%x) not found in Python's bytes", v.Name, k, []byte(k))
			}
			if !reflect.DeepEqual(k.Value(), normalizeInts(x)) {
				t.Fatalf("%s: key %s Value() = %#v, want %#v", v.Name, k, k.Value(), x)
			}
		})
	}
	if n < 100 {
		t.Fatalf("only %d keys checked", n)
	}
}

func walk(v any, f func(any)) {
	f(v)
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			walk(e, f)
		}
	case Set:
		walk([]any(x), f)
	case *Map:
		for _, e := range x.Entries {
			walk(e.Key, f)
			walk(e.Value, f)
		}
	}
}

func normalizeInts(v any) any {
	if x, ok := v.(int); ok {
		return int64(x)
	}
	return v
}

// StrText and AppendRepr read a str key from its msgpack: every length
// form, and a tuple key falls back to Repr.
func TestKeyStrTextAndAppendRepr(t *testing.T) {
	for _, text := range []string{"x", "it's", strings.Repeat("a", 40), strings.Repeat("b", 300), strings.Repeat("c", 70000)} {
		k := StrKey(text)
		got, ok := k.StrText()
		if !ok || got != text {
			t.Errorf("StrText of a %d-byte key: %v", len(text), ok)
		}
		if string(k.AppendRepr([]byte("<"))) != "<"+pyStrRepr(text) {
			t.Errorf("AppendRepr of a %d-byte key", len(text))
		}
	}
	tk, _ := KeyOf([]any{"x", int64(1)})
	if _, ok := tk.StrText(); ok || string(tk.AppendRepr(nil)) != "('x', 1)" || tk.ListString() != "['x', 1]" {
		t.Errorf("tuple key: %q %q", tk.AppendRepr(nil), tk.ListString())
	}
}
