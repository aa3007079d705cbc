package protocol

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// SplitBatch returns each item's own bytes, for a list and for a lone
// dict, and fails (never panics) on a message cut anywhere.
func TestSplitBatch(t *testing.T) {
	items := []any{NewMap("op", "a", "n", int64(1)), "OK", NewMap("op", "b", "x", []any{1.5, nil})}
	frames, err := Encode(items, nil)
	if err != nil {
		t.Fatal(err)
	}
	raws, err := SplitBatch(frames[0])
	if err != nil || len(raws) != 3 {
		t.Fatalf("%d items, %v; want 3", len(raws), err)
	}
	for i, it := range items {
		want, _ := Encode(it, nil)
		if !bytes.Equal(raws[i], want[0]) {
			t.Errorf("item %d: %x, want %x", i, raws[i], want[0])
		}
	}
	one, _ := Encode(items[0], nil)
	if raws, err := SplitBatch(one[0]); err != nil || len(raws) != 1 || !bytes.Equal(raws[0], one[0]) {
		t.Fatalf("a lone dict: %d items, %v", len(raws), err)
	}
	for cut := range len(frames[0]) {
		if _, err := SplitBatch(frames[0][:cut]); err == nil {
			t.Fatalf("a batch cut at %d of %d bytes was accepted", cut, len(frames[0]))
		}
	}
	if _, err := SplitBatch(append(bytes.Clone(frames[0]), 0xc0)); err == nil {
		t.Fatal("trailing bytes accepted")
	}
}

// DecodeElement resolves blob markers against the message's frames, in
// order, as Decode does for the whole message.
func TestDecodeElementResolvesBlobs(t *testing.T) {
	msg := []any{NewMap("op", "x", "v", NewPickled([]byte("p1"), []byte("buf"))), NewMap("op", "y", "v", NewPickled([]byte("p2")))}
	frames, err := Encode(msg, nil)
	if err != nil {
		t.Fatal(err)
	}
	raws, err := SplitBatch(frames[0])
	if err != nil {
		t.Fatal(err)
	}
	from := int64(1)
	for i, raw := range raws {
		v, err := DecodeElement(frames, raw, &from)
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		if _, ok := v.(*Map).Get("v").(*Blob); !ok {
			t.Fatalf("item %d: no blob", i)
		}
	}
	if from != int64(len(frames)) {
		t.Fatalf("blobs claimed frames up to %d, want %d", from, len(frames))
	}
}

// Fields' typed readers refuse other types and never panic on cut input.
func TestFieldsTypes(t *testing.T) {
	frames, _ := Encode(NewMap("i", int64(-70000), "f", 2.5, "s", "str", "b", []byte{1}, "n", nil, "big", uint64(1<<63)), nil)
	f, err := NewFields(frames[0])
	if err != nil {
		t.Fatal(err)
	}
	for {
		k, more, err := f.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
		switch string(k) {
		case "i":
			if v, err := f.Int(); v != -70000 || err != nil {
				t.Fatalf("i = %d, %v", v, err)
			}
		case "f":
			if v, err := f.Float(); v != 2.5 || err != nil {
				t.Fatalf("f = %v, %v", v, err)
			}
		case "s":
			if v, err := f.Str(); v != "str" || err != nil {
				t.Fatalf("s = %q, %v", v, err)
			}
		case "b":
			if v, err := f.Bin(); !bytes.Equal(v, []byte{1}) || err != nil {
				t.Fatalf("b = %v, %v", v, err)
			}
		case "n":
			if v, err := f.Float(); v != 0 || err != nil {
				t.Fatalf("n = %v, %v", v, err)
			}
		case "big": // last: after an error the Fields is not read on
			if _, err := f.Int(); err == nil {
				t.Fatal("2^63 read as an int64")
			}
		}
	}
	one, _ := Encode(NewMap("f", 2.5), nil)
	g, _ := NewFields(one[0])
	if _, _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Int(); err == nil {
		t.Fatal("a float read as an int")
	}
	for cut := range len(frames[0]) {
		f, err := NewFields(frames[0][:cut])
		if err != nil {
			continue
		}
		for i := 0; i < 10; i++ {
			if _, more, err := f.Next(); err != nil || !more {
				break
			}
			if f.Skip() != nil {
				break
			}
		}
	}
}

func TestFieldsRawAndBool(t *testing.T) {
	inner := NewMap("bandwidth", NewMap("total", 1e8), "tags", []any{"a", int64(1)})
	frames, _ := Encode(NewMap("t", true, "f", false, "n", nil, "m", inner, "s", "x"), nil)
	f, err := NewFields(frames[0])
	if err != nil {
		t.Fatal(err)
	}
	for want := []string{"t", "f", "n", "m", "s"}; len(want) > 0; want = want[1:] {
		k, more, err := f.Next()
		if err != nil || !more || string(k) != want[0] {
			t.Fatalf("key %q, %v, %v; want %q", k, more, err, want[0])
		}
		switch want[0] {
		case "t", "f", "n":
			if v, err := f.Bool(); v != (want[0] == "t") || err != nil {
				t.Fatalf("%s = %v, %v", want[0], v, err)
			}
		case "m":
			raw, err := f.Raw()
			if err != nil {
				t.Fatal(err)
			}
			v, err := Decode([][]byte{raw}) // exactly the value, nothing after it
			if err != nil || String(v) != String(inner) {
				t.Fatalf("raw decodes to %s, %v; want %s", String(v), err, String(inner))
			}
		case "s":
			if _, err := f.Bool(); err == nil {
				t.Fatal("a str read as a bool")
			}
		}
	}
	if _, err := (&Fields{}).Raw(); err == nil {
		t.Fatal("Raw of nothing is not an error")
	}
}

// Fields.Key gives exactly KeyOf's key for what the generic decoder reads,
// taking a smallest-form str whole and everything else through KeyOf.
func TestFieldsKeyMatchesKeyOf(t *testing.T) {
	long := strings.Repeat("k", 300)
	// str8 holding 5 bytes: not Python's smallest form, canonicalized
	nonMinimal := []byte{0x81, 0xa1, 'v', 0xd9, 5, 'x', '-', 'a', 'b', 'c'}
	for name, v := range map[string]any{
		"fixstr": "inc-1", "str8": strings.Repeat("s", 40), "str16": long, "empty": "",
		"tuple": []any{"x", int64(3)}, "int": int64(7), "float": 2.5,
	} {
		frames, err := Encode(NewMap("v", v), nil)
		if err != nil {
			t.Fatal(err)
		}
		f := fieldsAt(t, frames[0])
		got, err := f.Key()
		want, _ := KeyOf(v)
		if err != nil || got != want {
			t.Errorf("%s: Key() = %q, %v; want %q", name, got, err, want)
		}
		if f.left != 0 || f.d.pos != len(frames[0]) {
			t.Errorf("%s: Key() left the reader at %d of %d", name, f.d.pos, len(frames[0]))
		}
	}
	f := fieldsAt(t, nonMinimal)
	if got, err := f.Key(); err != nil || got != StrKey("x-abc") {
		t.Errorf("non-minimal str8: Key() = %q, %v", got, err)
	}
	for name, v := range map[string]any{"bool": true, "nil": nil, "map": NewMap("a", int64(1))} {
		frames, _ := Encode(NewMap("v", v), nil)
		f := fieldsAt(t, frames[0])
		if k, err := f.Key(); err == nil {
			t.Errorf("%s: Key() = %q, want an error", name, k)
		}
	}
	frames, _ := Encode(NewMap("v", "a-long-enough-key"), nil)
	for cut := 3; cut < len(frames[0]); cut++ {
		f := fieldsAt(t, frames[0][:cut])
		if k, err := f.Key(); err == nil {
			t.Fatalf("cut at %d: Key() = %q from a truncated str", cut, k)
		}
	}
}

func TestFieldsKeys(t *testing.T) {
	for name, v := range map[string]any{
		"list": []any{"a", []any{"b", int64(1)}}, "empty": []any{}, "nil": nil,
	} {
		frames, _ := Encode(NewMap("v", v), nil)
		f := fieldsAt(t, frames[0])
		got, err := f.Keys()
		want, _ := KeysOf(v)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Keys() = %q, %v; want %q", name, got, err, want)
		}
	}
	frames, _ := Encode(NewMap("v", []any{"a", true}), nil)
	f := fieldsAt(t, frames[0])
	if _, err := f.Keys(); err == nil {
		t.Error("a list holding a bool read as keys")
	}
}

// fieldsAt returns a Fields positioned at the value of b's one entry.
func fieldsAt(t *testing.T, b []byte) Fields {
	t.Helper()
	f, err := NewFields(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := f.Next(); !ok || err != nil {
		t.Fatalf("no entry: %v", err)
	}
	return f
}

func TestFieldsStrAs(t *testing.T) {
	frames, _ := Encode(NewMap("a", "Client-1", "b", "Client-2", "c", nil), nil)
	f, _ := NewFields(frames[0])
	want := []string{"Client-1", "Client-2", ""}
	for i := 0; ; i++ {
		_, ok, err := f.Next()
		if !ok || err != nil {
			break
		}
		if got, err := f.StrAs("Client-1"); err != nil || got != want[i] {
			t.Errorf("entry %d: StrAs = %q, %v; want %q", i, got, err, want[i])
		}
	}
}

// DecodeKeepingRaw is Decode with one field left as its msgpack; what it
// cannot take (blobs, a top level that is not a dict, bad bytes) Decode
// takes, errors included.
func TestDecodeKeepingRaw(t *testing.T) {
	msg := NewMap("id", int64(3), "tasks", []any{[]any{"a", int64(1)}}, "done", true, "x-other", nil)
	frames, _ := Encode(msg, nil)
	v, err := DecodeKeepingRaw(frames, "tasks")
	if err != nil {
		t.Fatal(err)
	}
	m := v.(*Map)
	raw, ok := m.Get("tasks").(Raw)
	if !ok {
		t.Fatalf("tasks decoded as %s", String(m.Get("tasks")))
	}
	whole, _ := Decode(frames)
	if back, _ := Decode([][]byte{raw}); !reflect.DeepEqual(back, whole.(*Map).Get("tasks")) {
		t.Errorf("the raw tasks decode to %s", String(back))
	}
	m.Set("tasks", whole.(*Map).Get("tasks"))
	if !reflect.DeepEqual(m, whole) {
		t.Errorf("the other fields: %s, want %s", String(m), String(whole))
	}
	blobbed, _ := Encode(NewMap("tasks", []any{}, "b", NewPickled([]byte("x"))), nil)
	for name, frames := range map[string][][]byte{"blobs": blobbed, "a list": mustEncode(t, []any{int64(1)})} {
		got, err := DecodeKeepingRaw(frames, "tasks")
		want, werr := Decode(frames)
		if err != nil || werr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s, %v; Decode gives %s, %v", name, String(got), err, String(want), werr)
		}
	}
	for cut := range len(frames[0]) {
		_, err := DecodeKeepingRaw([][]byte{frames[0][:cut]}, "tasks")
		_, werr := Decode([][]byte{frames[0][:cut]})
		if err == nil || werr == nil || err.Error() != werr.Error() {
			t.Fatalf("cut at %d: %v, Decode: %v", cut, err, werr)
		}
	}
}

func TestFieldsBinAsAndIsInt(t *testing.T) {
	frames, _ := Encode([]any{[]byte("ty"), []byte("ty"), []byte("other"), nil, int64(5), int64(-3),
		int64(1) << 40, uint64(1) << 63, 1.5, "s"}, nil)
	f := ReadValues(frames[0])
	if n, err := f.Array(); err != nil || n != 10 {
		t.Fatal(n, err)
	}
	same := []byte("ty")
	if b, err := f.BinAs(same); err != nil || &b[0] != &same[0] {
		t.Errorf("equal bytes: %q, %v, not the same slice", b, err)
	}
	if b, err := f.BinAs(nil); err != nil || string(b) != "ty" {
		t.Errorf("no same: %q, %v", b, err)
	}
	if b, err := f.BinAs(same); err != nil || string(b) != "other" {
		t.Errorf("other bytes: %q, %v", b, err)
	}
	if b, err := f.BinAs(same); err != nil || b != nil {
		t.Errorf("nil: %q, %v", b, err)
	}
	for i, want := range []bool{true, true, true, true, false, false} {
		if got := f.IsInt(); got != want {
			t.Errorf("value %d: IsInt = %v", i+4, got)
		}
		if err := f.Skip(); err != nil {
			t.Fatal(err)
		}
	}
	if f.IsInt() {
		t.Error("IsInt past the end")
	}
}
