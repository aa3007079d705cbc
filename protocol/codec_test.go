package protocol

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func mustEncode(t *testing.T, v any) [][]byte {
	t.Helper()
	frames, err := Encode(v, nil)
	if err != nil {
		t.Fatalf("Encode(%s): %v", String(v), err)
	}
	return frames
}

// TestEncodeForms pins the exact msgpack forms Python writes (checked
// against msgpack.dumps(x, use_bin_type=True) by hand and by the golden
// "scalars", "floats" and "sizes" vectors).
func TestEncodeForms(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{nil, "c0"}, {true, "c3"}, {false, "c2"},
		{int64(0), "00"}, {int64(127), "7f"}, {int64(128), "cc80"}, {int64(255), "ccff"},
		{int64(256), "cd0100"}, {int64(65536), "ce00010000"}, {int64(1 << 32), "cf0000000100000000"},
		{int64(-1), "ff"}, {int64(-32), "e0"}, {int64(-33), "d0df"}, {int64(-129), "d1ff7f"},
		{int64(math.MinInt64), "d38000000000000000"}, {uint64(math.MaxUint64), "cfffffffffffffffff"},
		{uint64(5), "05"}, {5, "05"}, {int32(-2), "fe"}, {uint32(300), "cd012c"},
		{1.5, "cb3ff8000000000000"}, {float32(1.5), "cb3ff8000000000000"},
		{"", "a0"}, {"ab", "a26162"}, {[]byte("ab"), "c4026162"}, {[]byte{}, "c400"},
		{[]any{}, "90"}, {[]any{int64(1), "a"}, "9201a161"},
		{NewMap("op", "x"), "81a26f70a178"},
		{Set{"a"}, "82a75f5f5365745f5fc3a761732d6c69737491a161"},
		{Raw{0x93, 1, 2, 3}, "93010203"}, {StrKey("k"), "a16b"},
		{[]string{"a"}, "91a161"}, {[]Key{StrKey("a")}, "91a161"}, {[]int64{-1, 1}, "92ff01"},
		{[]float64{0}, "91cb0000000000000000"}, {[]*Map{NewMap()}, "9180"},
		{map[string]any{"b": int64(1), "a": nil}, "82a161c0a16201"},
		{map[string]int64{"b": 2, "a": 1}, "82a16101a16202"},
		{map[Key]any{StrKey("b"): true, StrKey("a"): false}, "82a161c2a162c3"},
		{map[Key][]string{StrKey("k"): {"w"}}, "81a16b91a177"},
		{map[Key]int64{StrKey("k"): 300}, "81a16bcd012c"},
		{(*Map)(nil), "c0"},
	}
	for _, tt := range tests {
		frames := mustEncode(t, tt.in)
		if got := hexs(frames[0]); got != tt.want || len(frames) != 1 {
			t.Errorf("Encode(%#v) = %s (%d frames), want %s", tt.in, got, len(frames), tt.want)
		}
	}
}

func hexs(b []byte) string {
	const digits = "0123456789abcdef"
	var sb strings.Builder
	for _, c := range b {
		sb.WriteByte(digits[c>>4])
		sb.WriteByte(digits[c&15])
	}
	return sb.String()
}

func TestEncodeRejectsUnknownTypesAndDepth(t *testing.T) {
	if _, err := Encode(struct{}{}, nil); err == nil {
		t.Fatal("encoded a struct")
	}
	if _, err := Encode(NewMap("x", []any{make(chan int)}), nil); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("error should name the field: %v", err)
	}
	var deep any = int64(1)
	for i := 0; i < maxDepth+2; i++ {
		deep = []any{deep}
	}
	if _, err := Encode(deep, nil); err == nil {
		t.Fatal("encoded a value nested past maxDepth")
	}
}

func TestMapOps(t *testing.T) {
	m := NewMap("op", "compute-task", "key", StrKey("x"))
	if m.Get("op") != "compute-task" || m.Get("missing") != nil || m.Len() != 2 {
		t.Fatalf("Get: %s", String(m))
	}
	m.Set("op", "free-keys")
	m.Set("stimulus_id", "s1")
	if m.Get("op") != "free-keys" || m.Entries[0].Key != "op" || m.Len() != 3 {
		t.Fatalf("Set must replace in place and append new keys: %s", String(m))
	}
	if v, ok := m.Delete("key"); !ok || v != StrKey("x") || m.Len() != 2 {
		t.Fatalf("Delete: %v %v %s", v, ok, String(m))
	}
	if _, ok := m.Delete("key"); ok {
		t.Fatal("deleted twice")
	}
	// Non-string keys are kept but never match a string lookup.
	m.Entries = append(m.Entries, Entry{Key: []any{"op"}, Value: int64(1)})
	if m.Get("op") != "free-keys" {
		t.Fatal("tuple key shadowed a string key")
	}
	var nilMap *Map
	if nilMap.Get("x") != nil || nilMap.Len() != 0 {
		t.Fatal("nil map lookups must be empty")
	}
	for _, bad := range [][]any{{"odd"}, {1, "x"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewMap(%v) did not panic", bad)
				}
			}()
			NewMap(bad...)
		}()
	}
}

func TestSetRoundTrip(t *testing.T) {
	in := NewMap("keys", Set{"a", []any{"x", int64(1)}}, "empty", Set{})
	out, err := Decode(mustEncode(t, in))
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*Map)
	if s, ok := m.Get("keys").(Set); !ok || len(s) != 2 || s[0] != "a" {
		t.Fatalf("keys: %s", String(m.Get("keys")))
	}
	if s, ok := m.Get("empty").(Set); !ok || len(s) != 0 {
		t.Fatalf("empty: %s", String(m.Get("empty")))
	}
}

// TestDecodeMarkers follows loads._decode_default / msgpack_decode_default.
func TestDecodeMarkers(t *testing.T) {
	sub := mustEncode(t, NewMap("serializer", "pickle", "num-sub-frames", int64(1)))[0]
	msg := func(v any) [][]byte { return [][]byte{mustEncode(t, v)[0], sub, []byte("payload")} }
	tests := []struct {
		name string
		v    any
		ok   func(any) bool
	}{
		{"serialized", NewMap("__Serialized__", int64(1)), func(v any) bool { b, ok := v.(*Blob); return ok && !b.Pickled }},
		{"pickled", NewMap("__Pickled__", int64(1)), func(v any) bool { b, ok := v.(*Blob); return ok && b.Pickled }},
		{"marker with extra keys", NewMap("x", int64(1), "__Pickled__", int64(1)), func(v any) bool { _, ok := v.(*Blob); return ok }},
		{"python True is offset 1", NewMap("__Pickled__", true), func(v any) bool { _, ok := v.(*Blob); return ok }},
		{"pickled 0 stays a dict", NewMap("__Pickled__", int64(0)), func(v any) bool { _, ok := v.(*Map); return ok }},
		{"pickled -1 stays a dict", NewMap("__Pickled__", int64(-1)), func(v any) bool { _, ok := v.(*Map); return ok }},
		{"enum stays a dict", NewMap("__Enum__", true, "name", "running"), func(v any) bool { _, ok := v.(*Map); return ok }},
		{"set with any value", NewMap("__Set__", false, "as-list", []any{}), func(v any) bool { _, ok := v.(Set); return ok }},
	}
	for _, tt := range tests {
		v, err := Decode(msg(tt.v))
		if err != nil || !tt.ok(v) {
			t.Errorf("%s: got %s, %v", tt.name, String(v), err)
		}
	}
}

func TestDecodeRejectsBadInput(t *testing.T) {
	sub := func(n int64) []byte { return mustEncode(t, NewMap("num-sub-frames", n))[0] }
	enc := func(v any) []byte { return mustEncode(t, v)[0] }
	deep := bytes.Repeat([]byte{0x91}, maxDepth+5)
	tests := []struct {
		name   string
		frames [][]byte
	}{
		{"no frames", nil},
		{"empty frame 0", [][]byte{{}}},
		{"reserved code c1", [][]byte{{0xc1}}},
		{"ext8", [][]byte{{0xc7, 0x01, 0x05, 0x00}}},
		{"fixext1", [][]byte{{0xd4, 0x01, 0x00}}},
		{"timestamp ext", [][]byte{{0xd6, 0xff, 0, 0, 0, 0}}},
		{"truncated str", [][]byte{{0xa5, 'a'}}},
		{"str32 of 4 GiB", [][]byte{{0xdb, 0xff, 0xff, 0xff, 0xff}}},
		{"bin32 of 4 GiB", [][]byte{{0xc6, 0xff, 0xff, 0xff, 0xff, 0}}},
		{"array32 of 4G items", [][]byte{{0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0}}},
		{"map32 of 4G entries", [][]byte{{0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0, 0xc0}}},
		{"truncated int64", [][]byte{{0xd3, 0, 0}}},
		{"truncated float", [][]byte{{0xcb, 0}}},
		{"truncated map value", [][]byte{{0x81, 0xa1, 'k'}}},
		{"trailing bytes", [][]byte{{0xc0, 0xc0}}},
		{"deep nesting", [][]byte{append(deep, 0xc0)}},
		{"blob offset beyond frames", [][]byte{enc(NewMap("__Serialized__", int64(5))), sub(0)}},
		{"blob offset huge uint", [][]byte{enc(NewMap("__Pickled__", uint64(math.MaxUint64))), sub(0)}},
		{"serialized offset 0 (inline form)", [][]byte{enc(NewMap("__Serialized__", int64(0)))}},
		{"serialized string offset", [][]byte{enc(NewMap("__Serialized__", "1")), sub(0)}},
		{"pickled float offset", [][]byte{enc(NewMap("__Pickled__", 1.0)), sub(0)}},
		{"num-sub-frames beyond frames", [][]byte{enc(NewMap("__Serialized__", int64(1))), sub(3), {}}},
		{"num-sub-frames negative", [][]byte{enc(NewMap("__Serialized__", int64(1))), sub(-1)}},
		{"num-sub-frames missing", [][]byte{enc(NewMap("__Serialized__", int64(1))), enc(NewMap("x", int64(1)))}},
		{"num-sub-frames not int", [][]byte{enc(NewMap("__Serialized__", int64(1))), enc(NewMap("num-sub-frames", "2"))}},
		{"sub-header not a map", [][]byte{enc(NewMap("__Pickled__", int64(1))), enc([]any{})}},
		{"sub-header garbage", [][]byte{enc(NewMap("__Pickled__", int64(1))), {0x81, 0xc1}}},
		{"sub-header trailing bytes", [][]byte{enc(NewMap("__Pickled__", int64(1))), append(sub(0), 0xc0)}},
		{"sub-header too deep", [][]byte{enc(NewMap("__Pickled__", int64(1))), append([]byte{0x81, 0xa1, 'x'}, append(deep, 0xc0)...)}},
		{"same blob twice", [][]byte{enc([]any{NewMap("__Pickled__", int64(1)), NewMap("__Pickled__", int64(1))}), sub(0)}},
		{"blob inside an earlier blob", [][]byte{enc([]any{NewMap("__Pickled__", int64(1)), NewMap("__Pickled__", int64(2))}), sub(1), sub(0)}},
		{"serialized offset false", [][]byte{enc(NewMap("__Serialized__", false)), sub(0)}},
		{"set without list", [][]byte{enc(NewMap("__Set__", true))}},
		{"set with map list", [][]byte{enc(NewMap("__Set__", true, "as-list", NewMap()))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Decode(tt.frames)
			if err == nil || !errors.Is(err, ErrDecode) {
				t.Fatalf("got %s, %v; want ErrDecode", String(v), err)
			}
		})
	}
}

// TestDecodeTruncatedEverywhere cuts every golden frame 0 at every byte:
// each prefix must fail with ErrDecode (a prefix of one msgpack value is
// never a complete value followed by nothing).
func TestDecodeTruncatedEverywhere(t *testing.T) {
	for _, v := range loadVectors(t) {
		frames := readVector(t, v)
		step := 1
		if len(frames[0]) > 4096 {
			step = 61
		}
		for c := 0; c < len(frames[0]); c += step {
			cut := append([][]byte{frames[0][:c]}, frames[1:]...)
			if _, err := Decode(cut); !errors.Is(err, ErrDecode) {
				t.Fatalf("%s: frame 0 cut at %d: %v", v.Name, c, err)
			}
		}
	}
}

func TestDecodeAcceptsFloat32AndAliasesBlobFrames(t *testing.T) {
	v, err := Decode([][]byte{{0xca, 0x3f, 0xc0, 0, 0}})
	if err != nil || v != 1.5 {
		t.Fatalf("float32: %v %v", v, err)
	}
	frames := mustEncode(t, NewMap("b", NewPickled([]byte("pk"), []byte("buf1"), []byte("buf2"))))
	out, err := Decode(frames)
	if err != nil {
		t.Fatal(err)
	}
	b := out.(*Map).Get("b").(*Blob)
	if &b.Frames[0][0] != &frames[2][0] {
		t.Fatal("blob frames must alias the message frames, not copies")
	}
	if cap(b.Frames) != len(b.Frames) {
		t.Fatal("blob frame list must be capped so appends cannot clobber later frames")
	}
	if obj, err := b.PickledObj(); err != nil || string(obj) != "pk" {
		t.Fatalf("PickledObj: %q %v", obj, err)
	}
}

// TestBlobRelayRenumbers: blobs from two messages relayed in one batch get
// fresh offsets and keep their bytes (§1.3: offsets are global to a message).
func TestBlobRelayRenumbers(t *testing.T) {
	a, _ := Decode(mustEncode(t, NewMap("x", NewPickled([]byte("A"), []byte("a1")))))
	b, _ := Decode(mustEncode(t, NewMap("y", NewPickled([]byte("B")))))
	batch := []any{a, b}
	frames := mustEncode(t, batch)
	if len(frames) != 4 {
		t.Fatalf("got %d frames, want 4", len(frames))
	}
	if want := "92" + "81a178" + "81ab5f5f5069636b6c65645f5f01" + "81a179" + "81ab5f5f5069636b6c65645f5f03"; hexs(frames[0]) != want {
		t.Fatalf("frame 0 = %s\nwant      %s", hexs(frames[0]), want)
	}
	out, err := Decode(frames)
	if err != nil {
		t.Fatal(err)
	}
	y := out.([]any)[1].(*Map).Get("y").(*Blob)
	if obj, _ := y.PickledObj(); string(obj) != "B" || len(y.Frames) != 0 {
		t.Fatalf("second blob: %q, %d frames", obj, len(y.Frames))
	}
}

func TestStringRendering(t *testing.T) {
	v := NewMap("k", []any{nil, true, int64(-1), 2.5, []byte("xx"), Set{"s"}},
		"b", &Blob{Pickled: true, Header: []byte{1}}, "s", &Blob{Header: []byte{1, 2}})
	want := `{"k": (None, true, -1, 2.5, b<2 bytes>, set("s")), "b": Pickled<1 bytes>, "s": Serialized<2 bytes>}`
	if got := String(v); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
