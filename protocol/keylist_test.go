package protocol

import (
	"bytes"
	"testing"
)

// A KeyList encodes byte for byte as the Go map of the same pairs, once
// sorted, whatever order it was built in.
func TestKeyListEncodesAsMap(t *testing.T) {
	a, b, c := StrKey("b-1"), StrKey("a-2"), mustKey(t, []any{"x", int64(3)})
	addrs := &KeyList[[]string]{[]KeyItem[[]string]{{c, []string{"tcp://w:1"}}, {a, nil}, {b, []string{"tcp://w:2", "tcp://w:3"}}}}
	sizes := &KeyList[int64]{[]KeyItem[int64]{{a, 8}, {c, -1}, {b, 1 << 40}}}
	addrs.Sort()
	sizes.Sort()
	for i := 1; i < addrs.Len(); i++ {
		if addrs.Items[i-1].Key >= addrs.Items[i].Key || sizes.Items[i-1].Key >= sizes.Items[i].Key {
			t.Fatalf("not in key order: %v %v", addrs, sizes)
		}
	}
	asMaps := NewMap("who_has", map[Key][]string{a: {}, b: {"tcp://w:2", "tcp://w:3"}, c: {"tcp://w:1"}},
		"nbytes", map[Key]int64{a: 8, b: 1 << 40, c: -1}, "none", map[Key]int64(nil))
	asLists := NewMap("who_has", addrs, "nbytes", sizes, "none", (*KeyList[int64])(nil))
	want, err := Encode(asMaps, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Encode(asLists, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !bytes.Equal(got[0], want[0]) {
		t.Errorf("lists encode as %x, maps as %x", got, want)
	}
	if v, ok := sizes.Get(c); !ok || v != -1 {
		t.Errorf("Get(%v) = %d, %v", c, v, ok)
	}
	if _, ok := sizes.Get(StrKey("absent")); ok {
		t.Error("Get of an absent key found it")
	}
}
