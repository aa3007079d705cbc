package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Golden vectors are real messages recorded from distributed's own writer by
// tests/golden/make_vectors.py: NAME.bin is the exact wire bytes, NAME.json
// describes the value (made with plain Python msgpack, not with this package).

type vector struct {
	Name         string   `json:"name"`
	Frames       int      `json:"frames"`
	FrameLengths []int    `json:"frame_lengths"`
	FirstRead    uint64   `json:"first_read"`
	SplitSize    int      `json:"split_size"`
	Value        descNode `json:"value"`
	wire         []byte
}

// descNode is the typed JSON of make_vectors.py: describe().
type descNode struct {
	T       string          `json:"t"`
	V       json.RawMessage `json:"v"`
	Rep     int             `json:"rep"`
	Pickled bool            `json:"pickled"`
	Offset  int             `json:"offset"`
	N       int             `json:"n"`
	Payload []string        `json:"payload_sha256"`
	Merged  []string        `json:"merged_sha256"`
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	paths, err := filepath.Glob("testdata/golden/*.bin")
	if err != nil || len(paths) < 30 {
		t.Fatalf("want >= 30 golden vectors in testdata/golden, found %d (%v); run tests/golden/make_vectors.py", len(paths), err)
	}
	var out []vector
	for _, p := range paths {
		var v vector
		js, err := os.ReadFile(strings.TrimSuffix(p, ".bin") + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(js, &v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if v.wire, err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func readVector(t *testing.T, v vector) [][]byte {
	t.Helper()
	r := bytes.NewReader(v.wire)
	frames, err := ReadFrames(r, DefaultLimits)
	if err != nil {
		t.Fatalf("ReadFrames: %v", err)
	}
	if r.Len() != 0 {
		t.Fatalf("ReadFrames left %d bytes unread", r.Len())
	}
	if len(frames) != v.Frames {
		t.Fatalf("got %d frames, Python wrote %d", len(frames), v.Frames)
	}
	for i, f := range frames {
		if len(f) != v.FrameLengths[i] {
			t.Fatalf("frame %d: %d bytes, Python wrote %d", i, len(f), v.FrameLengths[i])
		}
	}
	return frames
}

// TestGoldenDecodeEncode proves, for every recorded message: the framing is
// read as Python wrote it (including N < total for messages with numpy
// buffers), frame 0 decodes to the value Python's msgpack saw, blobs alias
// their exact header and sub-frames, and re-encoding reproduces Python's
// frames byte for byte (so frame 0 also decodes to an equal tree).
func TestGoldenDecodeEncode(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			frames := readVector(t, v)
			val, err := Decode(frames)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			matchDesc(t, "value", v.Value, val, frames)

			out, err := Encode(val, nil)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			again, err := Decode(out)
			if err != nil {
				t.Fatalf("Decode(Encode(v)): %v", err)
			}
			matchDesc(t, "re-encoded value", v.Value, again, out)
			if len(out) != len(frames) {
				t.Fatalf("re-encoded %d frames, want %d", len(out), len(frames))
			}
			for i := range frames {
				if !bytes.Equal(out[i], frames[i]) {
					t.Errorf("frame %d differs from Python's:\n go %x\n py %x", i, clip(out[i]), clip(frames[i]))
				}
			}

			var buf bytes.Buffer
			if err := WriteFrames(&buf, out); err != nil {
				t.Fatal(err)
			}
			back, err := ReadFrames(&buf, DefaultLimits)
			if err != nil || len(back) != len(frames) {
				t.Fatalf("ReadFrames(WriteFrames): %d frames, %v", len(back), err)
			}
			if v.FirstRead == uint64(len(v.wire)-8) && !bytes.Equal(FramesHeader(out), v.wire[:16+8*len(out)]) {
				t.Errorf("prelude differs from Python's for a single-gulp message")
			}
		})
	}
}

func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// matchDesc compares a decoded value with Python's description of it.
func matchDesc(t *testing.T, path string, d descNode, v any, frames [][]byte) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: "+format, append([]any{path}, args...)...)
	}
	switch d.T {
	case "nil":
		if v != nil {
			fail("got %s, want None", String(v))
		}
	case "bool":
		var want bool
		mustJSON(t, d.V, &want)
		if v != want {
			fail("got %#v, want %v", v, want)
		}
	case "int":
		var s string
		mustJSON(t, d.V, &s)
		want, _ := new(big.Int).SetString(s, 10)
		var got *big.Int
		switch x := v.(type) {
		case int64:
			got = big.NewInt(x)
		case uint64:
			if x <= math.MaxInt64 {
				fail("uint64 %d should have been int64", x)
			}
			got = new(big.Int).SetUint64(x)
		default:
			fail("got %T %s, want int %s", v, String(v), s)
		}
		if got.Cmp(want) != 0 {
			fail("got %s, want %s", got, want)
		}
	case "float":
		var s string
		mustJSON(t, d.V, &s)
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("bad float %q in description: %v", s, err)
		}
		got, ok := v.(float64)
		if !ok || math.Float64bits(got) != math.Float64bits(want) {
			fail("got %#v, want %v (%s)", v, want, s)
		}
	case "str":
		var want string
		mustJSON(t, d.V, &want)
		if v != want {
			fail("got %s, want str %q", String(v), clip([]byte(want)))
		}
	case "bin":
		var want []byte
		mustJSON(t, d.V, &want)
		got, ok := v.([]byte)
		if !ok || !bytes.Equal(got, want) {
			fail("got %s, want bin of %d bytes", String(v), len(want))
		}
	case "arr", "set":
		var items []descNode
		mustJSON(t, d.V, &items)
		if d.Rep > 0 {
			items = repeat(items[0], d.Rep)
		}
		got, ok := v.([]any)
		if d.T == "set" {
			s, isSet := v.(Set)
			got, ok = []any(s), isSet
		}
		if !ok || len(got) != len(items) {
			fail("got %s, want %s of %d", String(v), d.T, len(items))
		}
		for i := range items {
			matchDesc(t, path+"["+strconv.Itoa(i)+"]", items[i], got[i], frames)
		}
	case "map":
		var pairs [][2]descNode
		mustJSON(t, d.V, &pairs)
		m, ok := v.(*Map)
		if !ok || m.Len() != len(pairs) {
			fail("got %s, want map of %d", String(v), len(pairs))
		}
		for i, p := range pairs {
			matchDesc(t, path+".key"+strconv.Itoa(i), p[0], m.Entries[i].Key, frames)
			matchDesc(t, path+"."+String(m.Entries[i].Key), p[1], m.Entries[i].Value, frames)
		}
	case "blob":
		matchBlob(t, path, d, v, frames)
	default:
		t.Fatalf("unknown description type %q", d.T)
	}
}

func matchBlob(t *testing.T, path string, d descNode, v any, frames [][]byte) {
	t.Helper()
	b, ok := v.(*Blob)
	if !ok || b.Pickled != d.Pickled {
		t.Fatalf("%s: got %s, want blob (pickled=%v)", path, String(v), d.Pickled)
	}
	if !bytes.Equal(b.Header, frames[d.Offset]) || len(b.Frames) != d.N {
		t.Fatalf("%s: blob header/frames do not match frames[%d] and its %d sub-frames", path, d.Offset, d.N)
	}
	for i, f := range b.Frames {
		if !bytes.Equal(f, frames[d.Offset+1+i]) {
			t.Fatalf("%s: sub-frame %d differs", path, i)
		}
	}
	// Python decompressed (lz4.block) and merged these; Go must agree.
	payload, err := b.PayloadFrames(1 << 30)
	if err != nil {
		t.Fatalf("%s: PayloadFrames: %v", path, err)
	}
	checkSHA(t, path+" payload", payload, d.Payload)
	if !d.Pickled {
		merged, err := b.MergedFrames(1 << 30)
		if err != nil {
			t.Fatalf("%s: MergedFrames: %v", path, err)
		}
		checkSHA(t, path+" merged", merged, d.Merged)
	}
}

func checkSHA(t *testing.T, what string, frames [][]byte, want []string) {
	t.Helper()
	if len(frames) != len(want) {
		t.Fatalf("%s: %d frames, Python had %d", what, len(frames), len(want))
	}
	for i, f := range frames {
		sum := sha256.Sum256(f)
		if hex.EncodeToString(sum[:]) != want[i] {
			t.Fatalf("%s: frame %d (%d bytes) differs from Python's", what, i, len(f))
		}
	}
}

func repeat(d descNode, n int) []descNode {
	out := make([]descNode, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func mustJSON(t *testing.T, raw json.RawMessage, into any) {
	t.Helper()
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("description: %v", err)
	}
}
