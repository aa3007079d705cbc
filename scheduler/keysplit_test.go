package scheduler

import (
	"strings"
	"testing"

	"daskgo/protocol"
)

func mustKey(t *testing.T, v any) protocol.Key {
	t.Helper()
	key, err := protocol.KeyOf(v)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// Cases from the doctests of dask.utils.key_split and keys seen from
// stock clients (dask.array, dask.dataframe, delayed, futures).
func TestKeySplit(t *testing.T) {
	cases := []struct {
		key  any
		want string
	}{
		{"x", "x"},
		{"x-1", "x"},
		{"x-1-2-3", "x"},
		{[]any{"x-2", int64(1)}, "x"},
		{"('x-2', 1)", "x"},
		{"('x', 1)", "x"},
		{"hello-world-1", "hello-world"},
		{"ae05086432ca935f6eba409a8ecd4896", "data"},
		{"<module.submodule.myclass object at 0xdaf372", "myclass"},
		{"x-abcdefab", "x"},
		{"_(x)", "x"},
		{"inc-1", "inc"},
		{"lambda-171bd0f0a2d2a1b8b4a0e1c9d0a1b2c3", "lambda"},
		{"finalize-hlgfinalizecompute-c1ca4e2f", "finalize-hlgfinalizecompute"},
		{[]any{"ones_like-fc74", int64(0), int64(1)}, "ones_like"},
		{[]any{"tk", int64(1), 2.5}, "tk"},
		{"needs-ghost", "needs-ghost"},
		{"sum-aggregate-finalize-abc", "sum-aggregate"},
		{int64(5), "Other"},
		{[]any{int64(5), "x"}, "Other"},
		{"", "Other"},
		{"x-gggggggg", "x-gggggggg"},
	}
	for _, c := range cases {
		if got := keySplit(mustKey(t, c.key)); got != c.want {
			t.Errorf("key_split(%v) = %q, want %q", c.key, got, c.want)
		}
	}
}

func TestKeySplitGroup(t *testing.T) {
	cases := []struct {
		key  any
		want string
	}{
		{[]any{"x-2", int64(1)}, "x-2"},
		{"('x-2', 1)", "x-2"},
		{"ae05086432ca935f6eba409a8ecd4896", "data"},
		{"<module.submodule.myclass object at 0xdaf372", "myclass"},
		{"x", "x"},
		{"x-1", "x"},
		{[]any{"sum-daa72eb89efe7bead772bfd3c0ceb446", int64(0)}, "sum-daa72eb89efe7bead772bfd3c0ceb446"},
		{"lambda-171bd0f0a2d2a1b8b4a0e1c9d0a1b2c3", "lambda"},
		{int64(3), "Other"},
	}
	for _, c := range cases {
		if got := keySplitGroup(mustKey(t, c.key)); got != c.want {
			t.Errorf("key_split_group(%v) = %q, want %q", c.key, got, c.want)
		}
	}
}

// tupleHeadStr reads a tuple's first str straight from the msgpack: it must
// agree with decoding the key, for every length form of the array and of
// the str, and refuse what is not a tuple starting with a str.
func TestTupleHeadStr(t *testing.T) {
	long := strings.Repeat("y", 300)   // str 16
	huge := strings.Repeat("z", 1<<16) // str 32
	many := make([]any, 20)            // array 16
	many[0] = "x-many"
	for i := 1; i < len(many); i++ {
		many[i] = int64(i)
	}
	for _, v := range []any{
		[]any{"x", int64(1)}, []any{"x-2", int64(1), 2.5}, []any{strings.Repeat("w", 40), int64(0)},
		[]any{long}, []any{huge, int64(3)}, many, []any{""},
	} {
		k := mustKey(t, v)
		got, ok := tupleHeadStr(k)
		if want := k.Value().([]any)[0].(string); !ok || got != want {
			t.Errorf("tupleHeadStr(%.40v) = %.40q, %v; want %.40q", v, got, ok, want)
		}
		if keySplitString(got) != keySplit(k) || got != keySplitGroup(k) {
			t.Errorf("%.40v: the head's splits differ from the key's", v)
		}
	}
	for _, v := range []any{"x", int64(5), []any{int64(5), "x"}, []any{}, []any{[]any{"x", int64(1)}, int64(2)}} {
		if got, ok := tupleHeadStr(mustKey(t, v)); ok {
			t.Errorf("tupleHeadStr(%v) = %q, want none", v, got)
		}
	}
	for _, k := range []protocol.Key{"", "\x92", "\x92\xa3ab", "\xdc\x00", "\x91\xd9"} { // truncated
		if got, ok := tupleHeadStr(k); ok {
			t.Errorf("tupleHeadStr(%q) = %q, want none", k, got)
		}
	}
}
