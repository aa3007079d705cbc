// Command reencode is the Go half of tests/test_golden.py: it reads every
// golden wire vector (IN_DIR/NAME.bin, recorded from Python), decodes it and
// writes it back with the protocol package, so that the pytest can check
// that distributed's own reader accepts what Go writes.
//
// For each NAME it writes OUT_DIR/NAME.bin (the message relayed: blobs kept
// byte for byte) and, when the message carries blobs, OUT_DIR/NAME.gomade.bin
// where every blob is rebuilt by Go: Pickled blobs with NewPickled, Serialized
// ones merged (MergedFrames) and re-split with NewSerialized at a 16 KiB
// shard, all encoded with lz4 negotiated (MaybeCompress).
//
//	go run ./protocol/internal/reencode IN_DIR OUT_DIR
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"daskgo/protocol"
)

const goShard = 16 << 10

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: reencode IN_DIR OUT_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "reencode:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	paths, err := filepath.Glob(filepath.Join(in, "*.bin"))
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("no vectors in %s", in)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".bin")
		if err := reencode(p, filepath.Join(out, name)); err != nil {
			return fmt.Errorf("vector %s: %w", name, err)
		}
	}
	return nil
}

func reencode(path, outBase string) error {
	wire, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	frames, err := protocol.ReadFrames(bytes.NewReader(wire), protocol.DefaultLimits)
	if err != nil {
		return fmt.Errorf("read frames: %w", err)
	}
	val, err := protocol.Decode(frames)
	if err != nil {
		return err
	}
	if err := write(outBase+".bin", val, nil); err != nil {
		return err
	}
	rebuilt, blobs, err := rebuild(val)
	if err != nil || blobs == 0 {
		return err
	}
	return write(outBase+".gomade.bin", rebuilt, &protocol.EncodeOptions{Compression: "lz4"})
}

func write(path string, v any, opts *protocol.EncodeOptions) error {
	frames, err := protocol.Encode(v, opts)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := protocol.WriteFrames(&buf, frames); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// rebuild replaces every blob in the tree by a Go-made one with the same
// payload, and counts them.
func rebuild(v any) (any, int, error) {
	switch x := v.(type) {
	case *protocol.Blob:
		b, err := goMade(x)
		return b, 1, err
	case []any:
		n := 0
		for i := range x {
			r, k, err := rebuild(x[i])
			if err != nil {
				return nil, 0, err
			}
			x[i], n = r, n+k
		}
		return x, n, nil
	case protocol.Set:
		r, n, err := rebuild([]any(x))
		if err != nil {
			return nil, 0, err
		}
		return protocol.Set(r.([]any)), n, nil
	case *protocol.Map:
		n := 0
		for i := range x.Entries {
			r, k, err := rebuild(x.Entries[i].Value)
			if err != nil {
				return nil, 0, err
			}
			x.Entries[i].Value, n = r, n+k
		}
		return x, n, nil
	}
	return v, 0, nil
}

func goMade(b *protocol.Blob) (*protocol.Blob, error) {
	if b.Pickled {
		obj, err := b.PickledObj()
		if err != nil {
			return nil, err
		}
		payload, err := b.PayloadFrames(1 << 30)
		if err != nil {
			return nil, err
		}
		return protocol.NewPickled(obj, payload...), nil
	}
	h, err := b.SubHeader()
	if err != nil {
		return nil, err
	}
	merged, err := b.MergedFrames(1 << 30)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"split-num-sub-frames", "split-offsets", "compression", "num-sub-frames"} {
		h.Delete(k)
	}
	return protocol.NewSerialized(h, merged, goShard)
}
