package scheduler

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"daskgo/protocol"
)

// keySplit mirrors dask.utils.key_split: the prefix name of a key, used for
// duration estimates (TaskPrefix). Tuples split their first element; a
// non-string key is "Other".
func keySplit(k protocol.Key) string {
	return keySplitValue(k.Value())
}

func keySplitValue(v any) string {
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return "Other"
		}
		return keySplitValue(x[0])
	case []byte:
		return keySplitString(string(x))
	case string:
		return keySplitString(x)
	default:
		return "Other"
	}
}

// keySplitString walks the words with strings.Cut instead of
// strings.Split, and returns a substring of s where Python's concatenation
// is one: it runs for every new task, so it allocates nothing in the
// common case.
func keySplitString(s string) string {
	w0, rest, more := strings.Cut(s, "-")
	if w0 == "" {
		return "Other" // words[0][0] raises IndexError in Python
	}
	first, _ := utf8.DecodeRuneInString(w0)
	base := w0
	if !unicode.IsLetter(first) {
		before, _, _ := strings.Cut(w0, ",")
		base = strings.Trim(before, "_'()\"")
	}
	end := len(w0) // s[len(w0):end] is the "-word-word" tail kept
	for more {
		var w string
		w, rest, more = strings.Cut(rest, "-")
		// dask's hex test is hex_pattern.match: a prefix match of [a-f]+, so
		// any 8-letter word starting with a-f stops the prefix.
		if isAlpha(w) && !(len(w) == 8 && w[0] >= 'a' && w[0] <= 'f') {
			end += 1 + len(w)
		} else {
			break
		}
	}
	result := base
	if end > len(w0) {
		if base == w0 {
			result = s[:end]
		} else {
			result = base + s[len(w0):end]
		}
	}
	if len(result) == 32 && isLowerHex(result) {
		return "data"
	}
	if result == "" {
		return "Other" // result[0] raises IndexError in Python
	}
	if result[0] == '<' {
		return lastDotted(result)
	}
	return result
}

// keyStr slices a plain str key (nearly all of them) out of its msgpack,
// for key_split without a decode; returned unboxed, since boxing it in an
// interface would allocate once per new task.
func keyStr(k protocol.Key) (string, bool) {
	if len(k) > 0 {
		c := k[0]
		switch {
		case c >= 0xa0 && c <= 0xbf && len(k) == 1+int(c-0xa0):
			return string(k[1:]), true
		case c == 0xd9 && len(k) >= 2 && len(k) == 2+int(k[1]):
			return string(k[2:]), true
		}
	}
	return "", false
}

// tupleHeadStr slices the first element of a tuple key whose first
// element is a str (dask.array and dataframe keys: ("x-abc", 0, 1)) out of
// its msgpack. key_split and key_split_group of such a key depend on that
// element alone, and decoding the whole tuple cost about six allocations
// per new task (BenchmarkEngineReplay).
func tupleHeadStr(k protocol.Key) (string, bool) {
	switch {
	case len(k) >= 1 && k[0] > 0x90 && k[0] <= 0x9f: // fixarray, not empty
		return strAt(k, 1)
	case len(k) >= 3 && k[0] == 0xdc && k[1]|k[2] != 0: // array 16
		return strAt(k, 3)
	case len(k) >= 5 && k[0] == 0xdd && k[1]|k[2]|k[3]|k[4] != 0: // array 32
		return strAt(k, 5)
	}
	return "", false
}

// strAt slices the msgpack str at k[i:], if there is one.
func strAt(k protocol.Key, i int) (string, bool) {
	if i >= len(k) {
		return "", false
	}
	n, h := 0, 0
	switch c := k[i]; {
	case c >= 0xa0 && c <= 0xbf:
		n, h = int(c-0xa0), 1
	case c == 0xd9 && i+2 <= len(k):
		n, h = int(k[i+1]), 2
	case c == 0xda && i+3 <= len(k):
		n, h = int(k[i+1])<<8|int(k[i+2]), 3
	case c == 0xdb && i+5 <= len(k):
		n, h = int(k[i+1])<<24|int(k[i+2])<<16|int(k[i+3])<<8|int(k[i+4]), 5
	default:
		return "", false
	}
	if i+h+n > len(k) {
		return "", false
	}
	return string(k[i+h : i+h+n]), true
}

// keySplitGroup mirrors distributed.utils.key_split_group: the TaskGroup
// name. A tuple key's group is its first element verbatim.
func keySplitGroup(k protocol.Key) string { return keySplitGroupValue(k.Value()) }

func keySplitGroupValue(v any) string {
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return "Other"
		}
		if s, ok := x[0].(string); ok {
			return s
		}
		return protocol.String(x[0])
	case []byte:
		return keySplitGroupString(string(x))
	case string:
		return keySplitGroupString(x)
	default:
		return "Other"
	}
}

func keySplitGroupString(x string) string {
	switch {
	case x == "":
		return "Other"
	case x[0] == '(':
		before, _, _ := strings.Cut(x, ",")
		return strings.Trim(before, "()\"'")
	case len(x) == 32 && isLowerHex(x):
		return "data"
	case x[0] == '<':
		return lastDotted(x)
	default:
		return keySplitString(x)
	}
}

// lastDotted is s.strip("<>").split()[0].split(".")[-1].
func lastDotted(s string) string {
	f := strings.Fields(strings.Trim(s, "<>"))
	if len(f) == 0 {
		return "Other"
	}
	parts := strings.Split(f[0], ".")
	return parts[len(parts)-1]
}

func isAlpha(w string) bool {
	if w == "" {
		return false
	}
	for _, r := range w {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}

// isLowerHex is re.match(r"[a-f0-9]{32}", s) for a 32-byte s.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
			return false
		}
	}
	return true
}
