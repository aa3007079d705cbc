package protocol

import (
	"bytes"
	"testing"
)

// TestBoxedInPlaceActsAsAConvertedValue checks that a value boxed at its
// storage asserts, compares and encodes as the ordinary conversion does,
// and that boxing allocates nothing.
func TestBoxedInPlaceActsAsAConvertedValue(t *testing.T) {
	type msg struct {
		n    int64
		f    float64
		list []any
		keys []Key
		kk   [2]Key
	}
	m := &msg{n: 1 << 40, f: 2.5, kk: [2]Key{StrKey("a"), StrKey("b")}}
	m.keys = m.kk[:]
	m.list = []any{Int64At(&m.n), Float64At(&m.f)}
	cases := []struct {
		name         string
		boxed, plain any
	}{
		{"int64", Int64At(&m.n), any(int64(1 << 40))},
		{"float64", Float64At(&m.f), any(2.5)},
		{"[]Key", KeysAt(&m.keys), any([]Key{StrKey("a"), StrKey("b")})},
		{"[]any", AnysAt(&m.list), any([]any{int64(1 << 40), 2.5})},
	}
	for _, c := range cases {
		switch p := c.plain.(type) {
		case int64, float64:
			if c.boxed != c.plain {
				t.Errorf("%s: boxed %v != %v", c.name, c.boxed, p)
			}
		}
		got, err := Encode(NewMap("v", c.boxed), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, err := Encode(NewMap("v", c.plain), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(got[0], want[0]) {
			t.Errorf("%s: encoded % x, want % x", c.name, got[0], want[0])
		}
	}
	if n, ok := Int64At(&m.n).(int64); !ok || n != 1<<40 {
		t.Errorf("Int64At asserts to %v, %v", n, ok)
	}
	if k, ok := KeysAt(&m.keys).([]Key); !ok || len(k) != 2 || k[1] != StrKey("b") {
		t.Errorf("KeysAt asserts to %v, %v", k, ok)
	}
	var sink any
	if a := testing.AllocsPerRun(100, func() { sink = Int64At(&m.n); sink = AnysAt(&m.list); sink = KeysAt(&m.keys) }); a != 0 {
		t.Errorf("boxing in place allocated %v times", a)
	}
	_ = sink
}
