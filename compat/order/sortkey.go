package order

import (
	"cmp"
	"strings"
)

// dask.order's sort_key(x) is the tuple
//
//	(total_dependencies[x], len(dependencies[x]), len(roots_connected[x]),
//	 -max_dependents[x], str(x))
//
// compared lexicographically. All parts are fixed once the preparation is
// done, so they live in per-node slices; str(x) is only reached on a tie of
// the first four and is computed on first use. Python's min and max return
// the first extreme element in iteration order and sorted is stable; the
// helpers below do the same.

// compareKeys is cmp(sort_key(a), sort_key(b)).
func (o *orderer) compareKeys(a, b int32) int {
	if c := o.compareTotals(a, b); c != 0 {
		return c
	}
	if c := cmp.Compare(o.deps.size(a), o.deps.size(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(o.nroots[a], o.nroots[b]); c != 0 {
		return c
	}
	if c := cmp.Compare(o.maxDependents[b], o.maxDependents[a]); c != 0 { // -max_dependents
		return c
	}
	return strings.Compare(o.str(a), o.str(b))
}

func (o *orderer) compareTotals(a, b int32) int {
	if o.totalBig != nil {
		return o.totalBig[a].Cmp(o.totalBig[b])
	}
	return cmp.Compare(o.total[a], o.total[b])
}

// str is Python's str(key). The first call renders every key's text at
// once: on the graphs where sort_key matters, nearly every node reaches it.
// Python compares str by code point, which is byte order for UTF-8.
func (o *orderer) str(k int32) string {
	if o.texts.off == nil {
		o.texts = newKeyTexts(o.g.Keys)
	}
	return o.texts.of(k)
}

// maxByKey is max(xs, key=sort_key): the first maximal element.
func (o *orderer) maxByKey(xs []int32) int32 {
	best := xs[0]
	for _, x := range xs[1:] {
		if o.compareKeys(x, best) > 0 {
			best = x
		}
	}
	return best
}

// minByKey is min(xs, key=sort_key): the first minimal element.
func (o *orderer) minByKey(xs []int32) int32 {
	best := xs[0]
	for _, x := range xs[1:] {
		if o.compareKeys(x, best) < 0 {
			best = x
		}
	}
	return best
}

// sortByKey is xs.sort(key=sort_key, reverse=reverse): stable, and with
// reverse equal elements keep their original order (CPython reverses,
// sorts stably, and reverses back).
func (o *orderer) sortByKey(xs []int32, reverse bool) {
	if len(xs) < 2 {
		return
	}
	if len(xs) == 2 { // the common case, without sort's setup
		if c := o.compareKeys(xs[0], xs[1]); (!reverse && c > 0) || (reverse && c < 0) {
			xs[0], xs[1] = xs[1], xs[0]
		}
		return
	}
	if len(xs) >= 256 && o.totalBig == nil {
		o.sortRecords(xs, reverse)
		return
	}
	if reverse {
		o.mergeSort(xs, func(a, b int32) int { return o.compareKeys(b, a) })
		return
	}
	o.mergeSort(xs, o.compareKeys)
}

// sortRecord is a node's sort_key laid out for a big sort: comparing two
// records touches one small pointer-free struct each instead of five
// node-indexed slices and a string header.
type sortRecord struct {
	total  uint64
	head   uint64 // 8 bytes of str after the prefix all records share
	ndeps  int32
	nroots int32
	negMax int32
	id     int32
}

// recordSorter sorts records by sort_key, stably; reverse flips the order
// of unequal records only.
type recordSorter struct {
	texts   *keyTexts
	reverse bool
	buf     []sortRecord
}

func (rs *recordSorter) less(a, b *sortRecord) bool {
	if rs.reverse {
		a, b = b, a
	}
	switch {
	case a.total != b.total:
		return a.total < b.total
	case a.ndeps != b.ndeps:
		return a.ndeps < b.ndeps
	case a.nroots != b.nroots:
		return a.nroots < b.nroots
	case a.negMax != b.negMax:
		return a.negMax < b.negMax
	case a.head != b.head:
		return a.head < b.head
	}
	return rs.texts.of(a.id) < rs.texts.of(b.id)
}

// sortRecords sorts a long list (the leaves, at the start) by sort_key.
func (o *orderer) sortRecords(xs []int32, reverse bool) {
	o.str(xs[0]) // render the texts
	recs := make([]sortRecord, len(xs))
	for i, k := range xs {
		recs[i] = sortRecord{total: o.total[k], ndeps: int32(o.deps.size(k)), nroots: o.nroots[k],
			negMax: -o.maxDependents[k], id: k}
	}
	strHeads(recs, &o.texts)
	rs := recordSorter{texts: &o.texts, reverse: reverse, buf: make([]sortRecord, len(recs))}
	rs.sort(recs, rs.buf)
	for i := range recs {
		xs[i] = recs[i].id
	}
}

// sort is a stable merge sort of xs using buf (same length) as scratch.
func (rs *recordSorter) sort(xs, buf []sortRecord) {
	stableMergeSort(xs, buf, func(a, b *sortRecord) bool { return rs.less(a, b) })
}

// strHeads sets each record's head: the 8 bytes after the longest prefix
// common to all their texts, big-endian and zero-padded. Comparing heads
// orders two texts as comparing them does, unless the heads are equal
// (then the texts decide): sibling keys such as ('inc', 17) and
// ('inc', 18) differ only after a long shared prefix.
func strHeads(recs []sortRecord, texts *keyTexts) {
	prefix := texts.of(recs[0].id)
	for i := range recs {
		s := texts.of(recs[i].id)
		n := 0
		for n < len(prefix) && n < len(s) && prefix[n] == s[n] {
			n++
		}
		prefix = prefix[:n]
	}
	for i := range recs {
		s := texts.of(recs[i].id)[len(prefix):]
		var h uint64
		for j := 0; j < 8; j++ {
			h <<= 8
			if j < len(s) {
				h |= uint64(s[j])
			}
		}
		recs[i].head = h
	}
}

// mergeSort is a stable sort with about n·log2(n) comparisons, for the
// short lists sorted during the walk (dependencies, dependents). Equal
// elements keep their order, so the result is the one timsort gives.
func (o *orderer) mergeSort(xs []int32, cmp func(a, b int32) int) {
	if len(xs) <= 12 {
		insertionSort(xs, cmp)
		return
	}
	if cap(o.sortBuf) < len(xs) {
		o.sortBuf = make([]int32, len(xs))
	}
	mergeSortInto(xs, o.sortBuf[:len(xs)], cmp)
}

// mergeSortInto sorts xs using buf (same length) as scratch.
func mergeSortInto(xs, buf []int32, cmp func(a, b int32) int) {
	stableMergeSort(xs, buf, func(a, b *int32) bool { return cmp(*a, *b) < 0 })
}

// stableMergeSort sorts xs with buf (same length) as scratch. A right
// element moves ahead of a left one only if strictly less, so equal
// elements keep their order, as in Python's sorted.
func stableMergeSort[T any](xs, buf []T, less func(a, b *T) bool) {
	if len(xs) <= 12 {
		for i := 1; i < len(xs); i++ {
			for j := i; j > 0 && less(&xs[j], &xs[j-1]); j-- {
				xs[j], xs[j-1] = xs[j-1], xs[j]
			}
		}
		return
	}
	mid := len(xs) / 2
	stableMergeSort(xs[:mid], buf[:mid], less)
	stableMergeSort(xs[mid:], buf[mid:], less)
	if !less(&xs[mid], &xs[mid-1]) { // already in order
		return
	}
	copy(buf, xs)
	i, j, k := 0, mid, 0
	for i < mid && j < len(xs) {
		if less(&buf[j], &buf[i]) {
			xs[k] = buf[j]
			j++
		} else {
			xs[k] = buf[i]
			i++
		}
		k++
	}
	k += copy(xs[k:], buf[i:mid])
	copy(xs[k:], buf[j:])
}

func insertionSort(xs []int32, cmp func(a, b int32) int) {
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && cmp(xs[j], xs[j-1]) < 0; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
}
