package order

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unicode/utf8"

	"daskgo/protocol"
)

// CPython 3.11's hash() of the values a dask key is made of, under a given
// PYTHONHASHSEED (HashSecret: str hashes depend on it, int, float and tuple
// hashes only through the strs inside). Set iteration order follows from
// these values, so every function here must agree with the interpreter bit
// for bit; pyhash_test.go compares them with hash() of a few hundred keys
// printed by the real interpreter under two seeds.
//
// Hashes are kept as uint64 (Py_uhash_t); the signed value Python shows is
// int64(h). A valid hash is never -1 (CPython reserves it for errors).

const (
	pyHashBits    = 61
	pyHashModulus = 1<<pyHashBits - 1 // _PyHASH_MODULUS, a Mersenne prime
	pyHashInf     = 314159            // _PyHASH_INF
	minusOne      = ^uint64(0)        // (Py_uhash_t)-1
	minusTwo      = minusOne - 1      // (Py_uhash_t)-2
)

// errNaNKey: hash(float('nan')) is the object's address since 3.10, so no
// emulation can reproduce it.
var errNaNKey = errors.New("order: a NaN in a key has no reproducible hash")

// HashSecret is the SipHash key of CPython's _Py_HashSecret: what
// PYTHONHASHSEED selects. The zero value is PYTHONHASHSEED=0 (randomization
// off).
type HashSecret struct{ k0, k1 uint64 }

// SecretForSeed is the key an interpreter started with PYTHONHASHSEED=seed
// hashes strs with (Python/bootstrap_hash.c, _Py_HashRandomization_Init):
// 0 switches randomization off (all zeros); any other seed fills the
// 24-byte secret with lcg_urandom(seed), of which SipHash reads the first
// 16 bytes as two little-endian words.
func SecretForSeed(seed uint32) HashSecret {
	if seed == 0 {
		return HashSecret{}
	}
	var buf [16]byte
	x := seed
	for i := range buf {
		x = x*214013 + 2531011
		buf[i] = byte(x >> 16)
	}
	return HashSecret{binary.LittleEndian.Uint64(buf[:8]), binary.LittleEndian.Uint64(buf[8:])}
}

// siphash13 is CPython's siphash13 (Python/pyhash.c) keyed by sec. It is
// generic so that str keys are hashed in place, without a copy.
func siphash13[T ~string | ~[]byte](sec HashSecret, src T) uint64 {
	v0 := sec.k0 ^ 0x736f6d6570736575
	v1 := sec.k1 ^ 0x646f72616e646f6d
	v2 := sec.k0 ^ 0x6c7967656e657261
	v3 := sec.k1 ^ 0x7465646279746573
	b := uint64(len(src)) << 56
	for len(src) >= 8 {
		mi := uint64(src[0]) | uint64(src[1])<<8 | uint64(src[2])<<16 | uint64(src[3])<<24 |
			uint64(src[4])<<32 | uint64(src[5])<<40 | uint64(src[6])<<48 | uint64(src[7])<<56
		src = src[8:]
		v3 ^= mi
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= mi
	}
	var t uint64
	for i := len(src) - 1; i >= 0; i-- {
		t = t<<8 | uint64(src[i])
	}
	b |= t
	v3 ^= b
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= b
	v2 ^= 0xff
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	return (v0 ^ v1) ^ (v2 ^ v3)
}

// sipRound is SINGLE_ROUND: two HALF_ROUNDs.
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v2 += v3
	v1 = bits.RotateLeft64(v1, 13) ^ v0
	v3 = bits.RotateLeft64(v3, 16) ^ v2
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v1
	v0 += v3
	v1 = bits.RotateLeft64(v1, 17) ^ v2
	v3 = bits.RotateLeft64(v3, 21) ^ v0
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// hashBytes is _Py_HashBytes: 0 for no bytes, -1 remapped to -2.
func hashBytes[T ~string | ~[]byte](sec HashSecret, b T) uint64 {
	if len(b) == 0 {
		return 0
	}
	if h := siphash13(sec, b); h != minusOne {
		return h
	}
	return minusTwo
}

// hashStr is hash(str). CPython hashes the string's internal buffer: one byte
// per code point if all are below 256 (latin-1 "kind"), else two bytes
// (UCS-2) if all are below 65536, else four (UCS-4), little-endian. scratch
// is reused between calls to avoid an allocation per non-ASCII key.
func hashStr(sec HashSecret, s string, scratch *[]byte) (uint64, error) {
	maxRune := rune(0)
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return hashBytes(sec, s), nil
	}
	n := 0
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return 0, fmt.Errorf("order: key %q is not valid UTF-8", s)
			}
		}
		maxRune = max(maxRune, r)
		n++
	}
	width := 1
	switch {
	case maxRune >= 0x10000:
		width = 4
	case maxRune >= 0x100:
		width = 2
	}
	buf := (*scratch)[:0]
	for _, r := range s {
		switch width {
		case 1:
			buf = append(buf, byte(r))
		case 2:
			buf = binary.LittleEndian.AppendUint16(buf, uint16(r))
		default:
			buf = binary.LittleEndian.AppendUint32(buf, uint32(r))
		}
	}
	*scratch = buf
	return hashBytes(sec, buf), nil
}

// hashUint is hash(int) of a non-negative int: the value modulo 2**61-1.
func hashUint(v uint64) uint64 {
	// 2**61 ≡ 1 (mod 2**61-1): fold the top three bits onto the rest.
	x := (v & pyHashModulus) + v>>pyHashBits
	if x >= pyHashModulus {
		x -= pyHashModulus
	}
	return x
}

// hashInt is hash(int) (long_hash): sign * (|v| mod 2**61-1), -1 -> -2.
func hashInt(v int64) uint64 {
	if v >= 0 {
		return hashUint(uint64(v))
	}
	x := -hashUint(uint64(-v)) // uint64(-MinInt64) is 2**63: still right
	if x == minusOne {
		return minusTwo
	}
	return x
}

// hashFloat is _Py_HashDouble: integral floats hash like the equal int, the
// rest by reducing the binary fraction modulo 2**61-1, 28 bits at a time.
func hashFloat(v float64) (uint64, error) {
	switch {
	case math.IsNaN(v):
		return 0, errNaNKey
	case math.IsInf(v, 1):
		return pyHashInf, nil
	case math.IsInf(v, -1):
		return minusOne - pyHashInf + 1, nil // -314159 as Py_uhash_t
	}
	m, e := math.Frexp(v)
	sign := uint64(1)
	if m < 0 {
		sign = minusOne
		m = -m
	}
	var x uint64
	for m != 0 {
		x = ((x << 28) & pyHashModulus) | x>>(pyHashBits-28)
		m *= 268435456.0 // 2**28
		e -= 28
		y := uint64(m) // the integer part
		m -= float64(y)
		x += y
		if x >= pyHashModulus {
			x -= pyHashModulus
		}
	}
	if e >= 0 {
		e %= pyHashBits
	} else {
		e = pyHashBits - 1 - ((-1 - e) % pyHashBits)
	}
	x = ((x << uint(e)) & pyHashModulus) | x>>(pyHashBits-uint(e))
	x *= sign
	if x == minusOne {
		x = minusTwo
	}
	return x, nil
}

// The xxHash-based tuplehash of CPython 3.8+ (64-bit constants).
const (
	xxPrime1 = 11400714785074694791
	xxPrime2 = 14029467366897019727
	xxPrime5 = 2870177450012600261
)

// keyHasher computes hash(key) straight from a Key's msgpack bytes, without
// decoding it into values: a million keys are hashed per graph.
type keyHasher struct {
	secret  HashSecret
	scratch []byte
	// The last str hashed and its hash: consecutive tuple keys mostly share
	// their first element, the layer name.
	lastStr  string
	lastHash uint64
}

// hash returns hash(k) for a whole key.
func (kh *keyHasher) hash(k protocol.Key) (uint64, error) {
	h, rest, err := kh.value(string(k), 0)
	if err != nil {
		return 0, fmt.Errorf("hash key %s: %w", k, err)
	}
	if len(rest) != 0 {
		return 0, fmt.Errorf("hash key %s: %d trailing bytes", k, len(rest))
	}
	return h, nil
}

var errShortKey = errors.New("truncated key encoding")

// value hashes the msgpack value at the start of b and returns the rest.
func (kh *keyHasher) value(b string, depth int) (uint64, string, error) {
	if len(b) == 0 {
		return 0, "", errShortKey
	}
	c := b[0]
	switch {
	case c <= 0x7f: // positive fixint
		return hashUint(uint64(c)), b[1:], nil
	case c >= 0xe0: // negative fixint
		return hashInt(int64(int8(c))), b[1:], nil
	case c >= 0xa0 && c <= 0xbf: // fixstr
		return kh.str(b[1:], int(c&0x1f))
	case c >= 0x90 && c <= 0x9f: // fixarray
		return kh.tuple(b[1:], int(c&0x0f), depth)
	}
	size := payloadSize(c)
	if size == 0 {
		return 0, "", fmt.Errorf("msgpack type 0x%02x is not a dask key part", c)
	}
	if len(b) < 1+size {
		return 0, "", errShortKey
	}
	rest := b[1+size:]
	var n uint64
	for i := 1; i <= size; i++ {
		n = n<<8 | uint64(b[i])
	}
	switch c {
	case 0xcc, 0xcd, 0xce, 0xcf: // uint 8/16/32/64
		return hashUint(n), rest, nil
	case 0xd0:
		return hashInt(int64(int8(n))), rest, nil
	case 0xd1:
		return hashInt(int64(int16(n))), rest, nil
	case 0xd2:
		return hashInt(int64(int32(n))), rest, nil
	case 0xd3:
		return hashInt(int64(n)), rest, nil
	case 0xca:
		h, err := hashFloat(float64(math.Float32frombits(uint32(n))))
		return h, rest, err
	case 0xcb:
		h, err := hashFloat(math.Float64frombits(n))
		return h, rest, err
	case 0xd9, 0xda, 0xdb: // str 8/16/32
		return kh.str(rest, int(n))
	default: // 0xdc, 0xdd: array 16/32
		return kh.tuple(rest, int(n), depth)
	}
}

// payloadSize is the number of big-endian bytes after type byte c: a
// number's payload, or the length of a str or array. 0 for types that cannot
// be part of a key (nil, bool, bin, map, ext).
func payloadSize(c byte) int {
	switch c {
	case 0xcc, 0xd0, 0xd9:
		return 1
	case 0xcd, 0xd1, 0xda, 0xdc:
		return 2
	case 0xce, 0xd2, 0xca, 0xdb, 0xdd:
		return 4
	case 0xcf, 0xd3, 0xcb:
		return 8
	}
	return 0
}

func (kh *keyHasher) str(b string, n int) (uint64, string, error) {
	if n > len(b) {
		return 0, "", errShortKey
	}
	s := b[:n]
	if s == kh.lastStr && s != "" {
		return kh.lastHash, b[n:], nil
	}
	h, err := hashStr(kh.secret, s, &kh.scratch)
	if err == nil {
		kh.lastStr, kh.lastHash = s, h
	}
	return h, b[n:], err
}

// tuple is tuplehash: an xxHash-like accumulation of the items' hashes.
func (kh *keyHasher) tuple(b string, n int, depth int) (uint64, string, error) {
	if depth >= 32 {
		return 0, "", errors.New("key nested too deeply")
	}
	acc := uint64(xxPrime5)
	for i := 0; i < n; i++ {
		lane, rest, err := kh.value(b, depth+1)
		if err != nil {
			return 0, "", err
		}
		b = rest
		acc += lane * xxPrime2
		acc = bits.RotateLeft64(acc, 31)
		acc *= xxPrime1
	}
	acc += uint64(n) ^ (xxPrime5 ^ 3527539)
	if acc == minusOne {
		return 1546275796, b, nil
	}
	return acc, b, nil
}
