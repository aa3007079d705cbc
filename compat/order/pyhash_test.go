package order

import (
	"math"
	"testing"
)

func float64frombits(b uint64) float64 { return math.Float64frombits(b) }

// TestHashMatchesCPython compares keyHasher with hash() of a few hundred
// keys printed by the project's interpreter under PYTHONHASHSEED=0: str of
// all three internal widths, ints across the 2**61-1 modulus and the whole
// msgpack range, floats (integral, tiny, huge, inf), nested tuples.
func TestHashMatchesCPython(t *testing.T) {
	t.Parallel()
	checkHashes(t, 0)
}

// TestHashMatchesCPythonUnderAnotherSeed: the same keys under
// PYTHONHASHSEED=3141592653 (SecretForSeed's key derivation; every str
// hash differs from seed 0's).
func TestHashMatchesCPythonUnderAnotherSeed(t *testing.T) {
	t.Parallel()
	if SecretForSeed(3141592653) == (HashSecret{}) {
		t.Fatal("a nonzero seed gave the zero secret")
	}
	checkHashes(t, 3141592653)
}

func checkHashes(t *testing.T, seed uint32) {
	type vector struct {
		Key  testKey `json:"key"`
		Hash int64   `json:"hash"`
		Str  string  `json:"str"`
	}
	vectors := jsonLines[vector](t, runTestdataPythonSeed(t, seed, "gen_hashes.py"))
	if len(vectors) < 300 {
		t.Fatalf("only %d hash vectors", len(vectors))
	}
	kh := keyHasher{secret: SecretForSeed(seed)}
	bad, badStr := 0, 0
	for _, v := range vectors {
		k := v.Key.key(t)
		h, err := kh.hash(k)
		if err != nil {
			t.Errorf("hash %s: %v", v.Key, err)
			continue
		}
		if int64(h) != v.Hash {
			bad++
			t.Errorf("hash(%s) = %d, CPython says %d", v.Str, int64(h), v.Hash)
		}
		if s := k.String(); s != v.Str {
			badStr++
			t.Logf("protocol.Key.String() = %q, Python str() = %q", s, v.Str)
		}
		if s := string(appendKeyStr(nil, string(k))); s != v.Str {
			badStr++
			t.Logf("appendKeyStr = %q, Python str() = %q", s, v.Str)
		}
	}
	t.Logf("%d hash vectors, %d hash mismatches, %d str() mismatches", len(vectors), bad, badStr)
	if badStr > 0 {
		t.Errorf("str() renderings differ from Python's on %d keys", badStr)
	}
}

func TestHashNaNIsRejected(t *testing.T) {
	if _, err := hashFloat(math.NaN()); err == nil {
		t.Fatal("NaN must not hash")
	}
}
