package protocol

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

func TestSplitFrame(t *testing.T) {
	data := []byte("0123456789")
	tests := []struct {
		shard int
		want  []string
	}{
		{4, []string{"0123", "4567", "89"}},
		{5, []string{"01234", "56789"}},
		{10, []string{"0123456789"}},
		{100, []string{"0123456789"}},
		{0, []string{"0123456789"}}, // 0 means DefaultShardSize, like Python's `n or BIG_BYTES_SHARD_SIZE`
	}
	for _, tt := range tests {
		got := SplitFrame(data, tt.shard)
		if len(got) != len(tt.want) {
			t.Fatalf("shard %d: %q", tt.shard, got)
		}
		for i := range got {
			if string(got[i]) != tt.want[i] || cap(got[i]) != len(got[i]) {
				t.Fatalf("shard %d piece %d: %q (cap %d)", tt.shard, i, got[i], cap(got[i]))
			}
		}
	}
	if got := SplitFrame(nil, 4); len(got) != 1 || len(got[0]) != 0 {
		t.Fatalf("empty frame: %q", got)
	}
}

// TestSplitMatchesPython re-splits every Serialized payload of the golden
// split vectors (made by serialize_and_split with a small shard) from its
// merged frames: Go's NewSerialized must reproduce Python's sub-header and
// sub-frames byte for byte, or, where Python lz4-compressed the pieces, the
// same header and the same decompressed pieces.
func TestSplitMatchesPython(t *testing.T) {
	checked := 0
	for _, v := range loadVectors(t) {
		if v.SplitSize == 0 {
			continue
		}
		frames := readVector(t, v)
		val, err := Decode(frames)
		if err != nil {
			t.Fatal(err)
		}
		walk(val, func(x any) {
			b, ok := x.(*Blob)
			if !ok || b.Pickled {
				return
			}
			checked++
			checkResplit(t, v.Name, b, v.SplitSize)
		})
	}
	if checked < 4 {
		t.Fatalf("only %d split blobs checked", checked)
	}
}

func checkResplit(t *testing.T, name string, py *Blob, shard int) {
	t.Helper()
	h, err := py.SubHeader()
	if err != nil {
		t.Fatal(err)
	}
	merged, err := py.MergedFrames(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(h.Get("split-num-sub-frames").([]any)); n != len(merged) {
		t.Fatalf("%s: merged into %d frames, header lists %d", name, len(merged), n)
	}
	plain := &Map{Entries: append([]Entry(nil), h.Entries...)}
	for _, k := range []string{"split-num-sub-frames", "split-offsets", "compression", "num-sub-frames"} {
		plain.Delete(k)
	}
	compressed := strings.Contains(String(h.Get("compression")), "lz4")
	opts := &EncodeOptions{}
	if compressed {
		opts.Compression = "lz4"
	}
	goBlob, err := NewSerialized(plain, merged, shard)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Encode(goBlob, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !compressed {
		if !bytes.Equal(out[1], py.Header) {
			t.Fatalf("%s: sub-header\n go %s\n py %s", name, hex.EncodeToString(out[1]), hex.EncodeToString(py.Header))
		}
		if !framesEqual(out[2:], py.Frames) {
			t.Fatalf("%s: split frames differ from Python's", name)
		}
		return
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	goDecoded := back.(*Blob)
	gh, _ := goDecoded.SubHeader()
	if String(gh) != String(h) {
		t.Fatalf("%s: sub-header\n go %s\n py %s", name, String(gh), String(h))
	}
	goPayload, err := goDecoded.PayloadFrames(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	pyPayload, _ := py.PayloadFrames(1 << 30)
	if !framesEqual(goPayload, pyPayload) {
		t.Fatalf("%s: decompressed pieces differ", name)
	}
}

func TestNewSerializedKeepsPrecompressedFrames(t *testing.T) {
	h := NewMap("serializer", "x", "compression", []any{"lz4", nil})
	b, err := NewSerialized(h, [][]byte{[]byte("precompressed-long"), []byte("abcdefgh")}, 4)
	if err != nil {
		t.Fatal(err)
	}
	sh, _ := b.SubHeader()
	if got := String(sh); got != `{"serializer": "x", "compression": ("lz4", None, None), "split-num-sub-frames": (1, 2), "split-offsets": (0, 1), "num-sub-frames": 3}` {
		t.Fatalf("header %s", got)
	}
	if len(b.Frames) != 3 || string(b.Frames[0]) != "precompressed-long" {
		t.Fatalf("frames %q", b.Frames)
	}
	if h.Len() != 2 {
		t.Fatal("NewSerialized modified the caller's header")
	}
	if _, err := NewSerialized(NewMap("compression", []any{nil}), [][]byte{{1}, {2}}, 4); err == nil {
		t.Fatal("a compression list of the wrong length must be rejected")
	}
	if _, err := NewSerialized(NewMap("compression", []any{int64(1)}), [][]byte{{1}}, 4); err == nil {
		t.Fatal("a non-string codec must be rejected")
	}
}

func TestMergeSplitFrames(t *testing.T) {
	frames := [][]byte{[]byte("ab"), []byte("cd"), []byte("e"), []byte("f")}
	hdr := func(nums, offs []any) *Map {
		return NewMap("split-num-sub-frames", nums, "split-offsets", offs)
	}
	got, err := MergeSplitFrames(hdr([]any{int64(2), int64(1), int64(0), int64(1)}, []any{int64(0), int64(2), int64(3), int64(3)}), frames)
	if err != nil || len(got) != 4 || string(got[0]) != "abcd" || string(got[1]) != "e" || len(got[2]) != 0 || string(got[3]) != "f" {
		t.Fatalf("got %q, %v", got, err)
	}
	if &got[1][0] != &frames[2][0] {
		t.Fatal("a single piece should be passed through, not copied")
	}
	if got, err := MergeSplitFrames(NewMap("serializer", "pickle"), frames); err != nil || len(got) != 4 {
		t.Fatalf("no split keys: %q %v", got, err)
	}
	bad := []*Map{
		hdr([]any{int64(5)}, []any{int64(0)}),             // past the end
		hdr([]any{int64(1)}, []any{int64(4)}),             // offset at the end
		hdr([]any{int64(1)}, []any{int64(-1)}),            // negative offset
		hdr([]any{int64(-1)}, []any{int64(0)}),            // negative count
		hdr([]any{int64(1), int64(1)}, []any{int64(0)}),   // lengths differ
		hdr([]any{"1"}, []any{int64(0)}),                  // not ints
		hdr([]any{uint64(1 << 63)}, []any{int64(1)}),      // huge count
		hdr([]any{int64(1 << 62)}, []any{int64(1 << 62)}), // overflow bait
		NewMap("split-num-sub-frames", int64(1), "split-offsets", []any{}),
	}
	for i, h := range bad {
		if got, err := MergeSplitFrames(h, frames); err == nil {
			t.Errorf("bad header %d (%s) merged into %q", i, String(h), got)
		}
	}
}

func TestMaybeCompressAndDecompress(t *testing.T) {
	zeros := make([]byte, 100_000)
	rnd := make([]byte, 100_000)
	for i := range rnd {
		rnd[i] = byte(rand.Uint32())
	}
	if name, out := MaybeCompress(zeros, "lz4"); name != "lz4" || len(out) >= len(zeros)/10 {
		t.Fatalf("zeros: %q, %d bytes", name, len(out))
	} else if back, err := Decompress("lz4", out, len(zeros)); err != nil || !bytes.Equal(back, zeros) {
		t.Fatalf("round trip: %v", err)
	}
	for _, tc := range []struct {
		name  string
		in    []byte
		codec string
	}{{"random", rnd, "lz4"}, {"small", zeros[:9_999], "lz4"}, {"no codec", zeros, ""}} {
		if name, out := MaybeCompress(tc.in, tc.codec); name != "" || &out[0] != &tc.in[0] {
			t.Errorf("%s: compressed with %q", tc.name, name)
		}
	}
}

// TestDecompressPythonBlocks decodes lz4.block.compress output recorded from
// python-lz4 4.4.5, including the empty input.
func TestDecompressPythonBlocks(t *testing.T) {
	for in, want := range map[string]string{
		"0000000000":                       "",
		"010000001061":                     "a",
		"280000002f616202000e506261626162": strings.Repeat("ab", 20),
	} {
		raw, _ := hex.DecodeString(in)
		got, err := Decompress("lz4", raw, 1<<20)
		if err != nil || string(got) != want {
			t.Errorf("%s: got %q, %v", in, got, err)
		}
	}
}

func TestDecompressRejectsForgedInput(t *testing.T) {
	valid, _ := hex.DecodeString("280000002f616202000e506261626162")
	tests := map[string][]byte{
		"no prefix":                 {1, 0},
		"prefix says 4 GiB":         append([]byte{0xff, 0xff, 0xff, 0xff}, valid[4:]...),
		"prefix larger than output": append([]byte{0x29, 0, 0, 0}, valid[4:]...),
		"prefix smaller than data":  append([]byte{0x10, 0, 0, 0}, valid[4:]...),
		"garbage block":             {0x10, 0, 0, 0, 0xff, 0xff, 0xff},
		"truncated block":           valid[:10],
	}
	for name, in := range tests {
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		got, err := Decompress("lz4", in, 1<<20)
		runtime.ReadMemStats(&ms1)
		if err == nil {
			t.Errorf("%s: decompressed to %d bytes", name, len(got))
		}
		if ms1.TotalAlloc-ms0.TotalAlloc > 2<<20 {
			t.Errorf("%s: allocated %d bytes", name, ms1.TotalAlloc-ms0.TotalAlloc)
		}
	}
	if _, err := Decompress("zstd", valid, 1<<20); err == nil || !strings.Contains(err.Error(), "zstd") {
		t.Errorf("unsupported codec must be named: %v", err)
	}
}

func TestPayloadFramesRejectsBadCompressionList(t *testing.T) {
	for _, h := range []*Map{
		NewMap("num-sub-frames", int64(2), "compression", []any{nil}),
		NewMap("num-sub-frames", int64(1), "compression", []any{true}),
		NewMap("num-sub-frames", int64(1), "compression", "lz4"),
		NewMap("num-sub-frames", int64(1), "compression", []any{"snappy"}),
	} {
		n := int(h.Get("num-sub-frames").(int64))
		b := &Blob{Header: mustEncode(t, h)[0], Frames: make([][]byte, n)}
		if _, err := b.PayloadFrames(1 << 20); err == nil {
			t.Errorf("%s: accepted", String(h))
		}
	}
}

// TestGoMadeBlobs: NewPickled writes the sub-header exactly as Python's
// create_pickled_sub_frames does (checked against every golden Pickled blob
// sent without compression), and with lz4 negotiated compresses big buffers
// and names the codec per sub-frame.
func TestGoMadeBlobs(t *testing.T) {
	checked := 0
	for _, v := range loadVectors(t) {
		frames := readVector(t, v)
		val, _ := Decode(frames)
		walk(val, func(x any) {
			b, ok := x.(*Blob)
			if !ok || !b.Pickled {
				return
			}
			if h, _ := b.SubHeader(); strings.Contains(String(h.Get("compression")), "lz4") {
				return
			}
			obj, err := b.PickledObj()
			if err != nil {
				t.Fatal(err)
			}
			out := mustEncode(t, NewPickled(obj, b.Frames...))
			if !bytes.Equal(out[1], b.Header) {
				t.Fatalf("%s: Go-made sub-header\n go %x\n py %x", v.Name, out[1], b.Header)
			}
			checked++
		})
	}
	if checked < 5 {
		t.Fatalf("only %d pickled blobs compared", checked)
	}

	buf := make([]byte, 50_000)
	out, err := Encode(NewMap("p", NewPickled([]byte("pk"), buf, []byte("tiny"))), &EncodeOptions{Compression: "lz4"})
	if err != nil {
		t.Fatal(err)
	}
	b := mustDecode(t, out).(*Map).Get("p").(*Blob)
	h, _ := b.SubHeader()
	if got := String(h.Get("compression")); got != `("lz4", None)` || len(b.Frames[0]) >= len(buf) {
		t.Fatalf("compression %s, frame of %d bytes", got, len(b.Frames[0]))
	}
	payload, err := b.PayloadFrames(1 << 20)
	if err != nil || !bytes.Equal(payload[0], buf) || string(payload[1]) != "tiny" {
		t.Fatalf("payload: %v", err)
	}
}

func mustDecode(t *testing.T, frames [][]byte) any {
	t.Helper()
	v, err := Decode(frames)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
