package protocol

import (
	"fmt"
	"slices"
)

// DefaultShardSize is distributed.comm.shard's default (64 MiB): the largest
// sub-frame serialize_and_split leaves unsplit.
const DefaultShardSize = 64 << 20

// SplitFrame cuts frame into pieces of at most shard bytes, like
// distributed/protocol/utils.py: frame_split_size for a byte buffer. The
// pieces alias frame. shard <= 0 means DefaultShardSize.
func SplitFrame(frame []byte, shard int) [][]byte {
	if shard <= 0 {
		shard = DefaultShardSize
	}
	if len(frame) <= shard {
		return [][]byte{frame}
	}
	out := make([][]byte, 0, (len(frame)+shard-1)/shard)
	for i := 0; i < len(frame); i += shard {
		out = append(out, frame[i:min(i+shard, len(frame)):min(i+shard, len(frame))])
	}
	return out
}

// NewSerialized makes a Serialize payload from a serializer's header (for
// example {"serializer": "pickle", "writeable": []}) and its frames, split
// the way distributed/protocol/serialize.py: serialize_and_split does: every
// frame whose header "compression" entry is nil is cut into pieces of at most
// shard bytes (shard <= 0: DefaultShardSize), and "split-num-sub-frames",
// "split-offsets" and "compression" describe the cut. The encoder adds
// "num-sub-frames" and compresses pieces with the connection's codec.
// header is copied, not modified.
func NewSerialized(header *Map, frames [][]byte, shard int) (*Blob, error) {
	h := &Map{}
	if header != nil {
		h.Entries = slices.Clone(header.Entries)
	}
	codecs, err := compressionList(h, len(frames))
	if err != nil {
		return nil, err
	}
	var out [][]byte
	var outCodecs, nums, offsets []any
	for i, f := range frames {
		nums = append(nums, int64(1))
		offsets = append(offsets, int64(len(out)))
		if codecs[i] != nil {
			out = append(out, f)
			outCodecs = append(outCodecs, codecs[i])
			continue
		}
		pieces := SplitFrame(f, shard)
		nums[i] = int64(len(pieces))
		out = append(out, pieces...)
		outCodecs = append(outCodecs, make([]any, len(pieces))...)
	}
	h.Set("split-num-sub-frames", orEmpty(nums))
	h.Set("split-offsets", orEmpty(offsets))
	h.Set("compression", orEmpty(outCodecs))
	h.Delete("num-sub-frames")
	return &Blob{Frames: out, goHeaderMap: h}, nil
}

func orEmpty(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

// compressionList returns the header's per-frame codec list, or n nils.
func compressionList(h *Map, n int) ([]any, error) {
	v, ok := h.Lookup("compression")
	if !ok || v == nil {
		return make([]any, n), nil
	}
	list, ok := v.([]any)
	if !ok || len(list) != n {
		return nil, fmt.Errorf("sub-header compression %s does not list one codec per each of %d frames", String(v), n)
	}
	for i, c := range list {
		if _, isStr := c.(string); c != nil && !isStr {
			return nil, fmt.Errorf("sub-header compression entry %d is %s, not a codec name", i, typeName(c))
		}
	}
	return list, nil
}

// MergeSplitFrames undoes serialize_and_split: it joins the sub-frames that
// "split-num-sub-frames"/"split-offsets" say belong together, like the merge
// step of distributed/protocol/serialize.py: merge_and_deserialize. Call it
// on decompressed frames (Blob.PayloadFrames). A header without the split keys
// returns frames unchanged; a single-piece frame is returned without a copy.
// Python slices silently past the end; here every range must lie inside frames.
func MergeSplitFrames(header *Map, frames [][]byte) ([][]byte, error) {
	numsV, ok := header.Lookup("split-num-sub-frames")
	if !ok {
		return frames, nil
	}
	nums, ok1 := numsV.([]any)
	offs, ok2 := header.Get("split-offsets").([]any)
	if !ok1 || !ok2 || len(nums) != len(offs) {
		return nil, fmt.Errorf("split-num-sub-frames %s and split-offsets %s are not lists of equal length",
			String(numsV), String(header.Get("split-offsets")))
	}
	merged := make([][]byte, len(nums))
	for i := range nums {
		n, ok1 := nums[i].(int64)
		off, ok2 := offs[i].(int64)
		if !ok1 || !ok2 || n < 0 || off < 0 || off > int64(len(frames)) || n > int64(len(frames))-off {
			return nil, fmt.Errorf("split frame %d: %s sub-frames at offset %s outside the %d frames",
				i, String(nums[i]), String(offs[i]), len(frames))
		}
		switch n {
		case 0:
			merged[i] = []byte{}
		case 1:
			merged[i] = frames[off]
		default:
			size := 0
			for _, f := range frames[off : off+n] {
				size += len(f)
			}
			buf := make([]byte, 0, size)
			for _, f := range frames[off : off+n] {
				buf = append(buf, f...)
			}
			merged[i] = buf
		}
	}
	return merged, nil
}

// MergedFrames is PayloadFrames followed by MergeSplitFrames: the frames
// distributed's deserialize would see.
func (b *Blob) MergedFrames(maxSize int) ([][]byte, error) {
	frames, err := b.PayloadFrames(maxSize)
	if err != nil {
		return nil, err
	}
	h, err := b.SubHeader()
	if err != nil {
		return nil, err
	}
	return MergeSplitFrames(h, frames)
}
