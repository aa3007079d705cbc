package pickle

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"daskgo/compat/venv"
)

// spliceCases are made by Python: each a structure pickled with a
// persistent_id hook over its callables (as the materializer helper does),
// the table of those callables pickled once each, and the repr of the
// structure for comparison; and the same structure pickled the helper's
// other way, its callables as gets of a memo pre-populated from
// TableMemoBase, with three more table entries it does not use, so that the
// memo base differs from the references the pickle makes.
const makeCases = `
import io, json, pickle, functools, operator, types
from distributed.protocol.pickle import dumps as pdumps

def inc(x): return x + 1
class P(pickle.Pickler):
    def __init__(self, f, table):
        super().__init__(f, protocol=5)
        self.table = table
    def persistent_id(self, obj):
        if type(obj) in (types.FunctionType, types.BuiltinFunctionType, functools.partial):
            ids = [id(o) for o in self.table]
            if id(obj) not in ids:
                self.table.append(obj)
                ids.append(id(obj))
            return ids.index(id(obj))
        return None

lam = lambda x: x * 2
shared_list = [1, 2, 3]
cases = {
    "plain": {"a": 1, "b": (2.5, None, True), "c": b"bytes", "d": "text"},
    "one_function": (inc, 1),
    "function_twice": (inc, inc, shared_list, shared_list),
    "memo_after_pid": [lam, "repeated", "repeated", shared_list, shared_list, (lam, shared_list)],
    "many_memo": [lam] + [("k%d" % i, float(i)) for i in range(400)] + [lam, inc],
    "builtins": (operator.add, len, functools.partial(operator.mul, 3)),
    "nested": {"f": [inc, {"g": (lam, inc)}], "s": {1, 2}, "fs": frozenset({3})},
}
out = {}
for name, obj in cases.items():
    table = []
    f = io.BytesIO()
    P(f, table).dump(obj)
    out[name] = {"spec": f.getvalue().hex(), "objs": [pdumps(o).hex() for o in table]}
    full = table + [functools.partial(print, i) for i in range(3)]
    f = io.BytesIO()
    m = pickle.Pickler(f, protocol=5)
    m.memo = {id(o): ((1 << 30) + i, o) for i, o in enumerate(full)}
    m.dump(obj)
    out[name + "~memo"] = {"spec": f.getvalue().hex(), "objs": [pdumps(o).hex() for o in full],
                           "memo_base": len(full)}
print(json.dumps(out))
`

const checkCases = `
import json, sys, pickle
from distributed.protocol.pickle import loads
def inc(x): return x + 1
got = json.loads(sys.stdin.read())
for full_name, h in sorted(got.items()):
    obj = loads(bytes.fromhex(h))
    name = full_name.removesuffix("~memo")
    def norm(o):
        if callable(o):
            try:
                return ("callable", o(3) if not isinstance(o, type(len)) or o is not len else len([3]))
            except TypeError:
                return ("callable", o(3, 4))
        if isinstance(o, (list, tuple)):
            return [type(o).__name__] + [norm(x) for x in o]
        if isinstance(o, dict):
            return {k: norm(v) for k, v in o.items()}
        if isinstance(o, (set, frozenset)):
            return [type(o).__name__] + sorted(o)
        return o
    shared = []
    if name == "function_twice":
        shared = [obj[0] is obj[1], obj[2] is obj[3]]
    if name == "memo_after_pid":
        shared = [obj[0] is obj[5][0], obj[3] is obj[4], obj[4] is obj[5][1]]
    if name == "many_memo":
        shared = [obj[0] is obj[401]]
    print(full_name, json.dumps(norm(obj), sort_keys=True, default=str)[:300], shared)
`

func python(t *testing.T, code, stdin string) string {
	t.Helper()
	cmd := exec.Command(venv.Python(t), "-c", code)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

type spliceCase struct {
	Spec     string   `json:"spec"`
	Objs     []string `json:"objs"`
	MemoBase int      `json:"memo_base"`
}

func decodeHex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSpliceLoadsInPython: every spliced pickle is self-contained, loads in
// a stock interpreter to the structure that was pickled (callables
// working), and keeps the sharing of the original: an object referenced
// twice is one object, including callables and memoized values after a
// spliced-in load (the memo renumbering, also past 255 entries). Both of
// the helper's forms, persistent ids and table memo gets, load alike.
func TestSpliceLoadsInPython(t *testing.T) {
	var cases map[string]spliceCase
	if err := json.Unmarshal([]byte(python(t, makeCases, "")), &cases); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name, c := range cases {
		spec := decodeHex(t, c.Spec)
		objs := make([][]byte, len(c.Objs))
		for i, o := range c.Objs {
			objs[i] = decodeHex(t, o)
		}
		refs, err := Prepare(spec, len(objs), c.MemoBase)
		if err != nil {
			t.Fatalf("%s: prepare: %v", name, err)
		}
		used := len(objs)
		if c.MemoBase > 0 {
			used -= 3 // the memo form's entries that nothing refers to
		}
		if (refs > 0) != (used > 0) {
			t.Fatalf("%s: %d table references for %d objects used", name, refs, used)
		}
		got, err := Splice(nil, spec, objs)
		if err != nil {
			t.Fatalf("%s: splice: %v", name, err)
		}
		if n, err := Scan(got, 0); err != nil || n != 0 {
			t.Fatalf("%s: spliced pickle has %d persistent ids (%v)", name, n, err)
		}
		out[name] = hex.EncodeToString(got)
	}
	in, _ := json.Marshal(out)
	lines := strings.Split(python(t, checkCases, string(in)), "\n")
	want := map[string]string{
		"plain":          `plain {"a": 1, "b": ["tuple", 2.5, null, true], "c": "b'bytes'", "d": "text"} []`,
		"one_function":   `one_function ["tuple", ["callable", 4], 1] []`,
		"function_twice": `function_twice ["tuple", ["callable", 4], ["callable", 4], ["list", 1, 2, 3], ["list", 1, 2, 3]] [True, True]`,
		"memo_after_pid": `memo_after_pid ["list", ["callable", 6], "repeated", "repeated", ["list", 1, 2, 3], ["list", 1, 2, 3], ["tuple", ["callable", 6], ["list", 1, 2, 3]]] [True, True, True]`,
		"builtins":       `builtins ["tuple", ["callable", 7], ["callable", 1], ["callable", 9]] []`,
		"nested":         `nested {"f": ["list", ["callable", 4], {"g": ["tuple", ["callable", 6], ["callable", 4]]}], "fs": ["frozenset", 3], "s": ["set", 1, 2]} []`,
	}
	seen := 0
	for _, l := range lines {
		fullName, _, _ := strings.Cut(l, " ")
		name := strings.TrimSuffix(fullName, "~memo")
		if fullName != name {
			l = name + strings.TrimPrefix(l, fullName)
		}
		if name == "many_memo" {
			if !strings.HasSuffix(l, "[True]") {
				t.Errorf("many_memo lost sharing past 255 memo entries: %s", l)
			}
			seen++
			continue
		}
		if w, ok := want[name]; ok {
			seen++
			if l != w {
				t.Errorf("%s loaded as\n  %s\nwant\n  %s", name, l, w)
			}
		}
	}
	if seen != len(cases) {
		t.Fatalf("python checked %d of %d cases:\n%s", seen, len(cases), strings.Join(lines, "\n"))
	}
}

// TestPrepareRenumbers: a spec's own memo gets count from 0 once Prepare
// has taken its memo base off, in both widths, the table's gets untouched.
func TestPrepareRenumbers(t *testing.T) {
	// PROTO 5, EMPTY_LIST MEMOIZE (the pickler's index 5), BINGET 5,
	// LONG_BINGET 5, LONG_BINGET TableMemoBase+1, TUPLE3, STOP
	spec := []byte("\x80\x05]\x94h\x05j\x05\x00\x00\x00j\x01\x00\x00\x40\x87.")
	refs, err := Prepare(spec, 2, 5)
	if err != nil || refs != 1 {
		t.Fatalf("Prepare = %d, %v; want 1 reference", refs, err)
	}
	if want := "\x80\x05]\x94h\x00j\x00\x00\x00\x00j\x01\x00\x00\x40\x87."; string(spec) != want {
		t.Fatalf("renumbered to %q, want %q", spec, want)
	}
	got, err := Splice(nil, spec, [][]byte{[]byte("\x80\x05K\x00."), []byte("\x80\x05K\x01.")})
	if err != nil {
		t.Fatal(err)
	}
	want := "\x80\x05]\x94h\x00h\x00" + string(appendLoads(nil, []byte("\x80\x05K\x01."))) + "\x94\x87."
	if string(got) != want {
		t.Fatalf("spliced to %q, want %q", got, want)
	}
}

// TestPrepareRejects: what the helper could send that is not a usable spec,
// with and without a memo base (Scan is Prepare without one).
func TestPrepareRejects(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     string
		nobjs    int
		memoBase int
		want     string
	}{
		{"empty", "", 0, 0, "ends without STOP"},
		{"no stop", "\x80\x05N", 0, 0, "ends without STOP"},
		{"unknown opcode", "\x80\x05\xff.", 0, 0, "unknown opcode 0xff"},
		{"length past end", "\x80\x05X\xff\xff\xff\x7fab.", 0, 0, "runs past the end"},
		{"8-byte length", "\x80\x05\x8e\xff\xff\xff\xff\xff\xff\xff\xff.", 0, 0, "runs past the end"},
		{"truncated length", "\x80\x05X\x01", 0, 0, "truncated length"},
		{"trailing bytes", "\x80\x05N.junk", 0, 0, "after STOP"},
		{"pid without index", "\x80\x05NQ.", 1, 0, "without an index"},
		{"negative pid", "\x80\x05J\xff\xff\xff\xffQ.", 1, 0, "without an index"},
		{"pid out of range", "\x80\x05K\x03Q.", 3, 0, "persistent id 3, the graph has 3 objects"},
		{"out-of-band buffer", "\x80\x05\x97.", 0, 0, "out-of-band buffer"},
		{"text persid", "\x80\x02P1\nN.", 1, 0, "text PERSID"},
		{"unterminated line", "\x80\x02I12", 0, 0, "unterminated"},
		{"explicit memo with pid", "\x80\x02K\x00Qq\x00.", 1, 0, "explicit memo"},
		{"explicit memo before pid", "\x80\x02Nq\x000K\x00Q.", 1, 0, "explicit memo"},
		{"get before memoize with pid", "\x80\x05K\x00Qh\x00.", 1, 0, "memo get before"},
		{"table reference out of range", "\x80\x05j\x02\x00\x00\x40.", 2, 0, "memo reference to object 2, the graph has 2"},
		{"get below the base", "\x80\x05]\x94h\x00.", 0, 2, "below the memo base 2"},
		{"base with explicit memo", "\x80\x02]q\x01h\x01.", 0, 1, "explicit memo"},
		{"base with get before memoize", "\x80\x05h\x01.", 0, 1, "memo get before"},
		{"negative base", "\x80\x05N.", 0, -1, "memo base -1"},
		{"base in the table's range", "\x80\x05N.", 0, TableMemoBase, "memo base"},
	} {
		_, err := Prepare([]byte(tc.spec), tc.nobjs, tc.memoBase)
		if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrMalformed containing %q", tc.name, err, tc.want)
		}
	}
}

// FuzzPrepareThenSplice: Prepare (and so Scan, Prepare without a memo base)
// never panics, and on whatever it accepts with table references Splice
// succeeds (TaskSpec.Payload relies on it) and leaves a self-contained
// pickle.
func FuzzPrepareThenSplice(f *testing.F) {
	f.Add([]byte("\x80\x05\x95\x0b\x00\x00\x00\x00\x00\x00\x00K\x00Q\x94h\x00\x86."), 1, 0)
	f.Add([]byte("\x80\x05(K\x01K\x00Q\x94h\x00\x94h\x01t."), 2, 0)
	f.Add([]byte("\x80\x05N."), 0, 0)
	f.Add([]byte("\x80\x05]\x94h\x05j\x05\x00\x00\x00j\x01\x00\x00\x40\x87."), 2, 5)
	f.Add([]byte("\x80\x05j\x00\x00\x00\x40\x94h\x00\x86."), 1, 0)
	f.Add([]byte("\x80\x05(K\x01Qj\x00\x00\x00\x40\x94h\x03t."), 2, 3)
	f.Fuzz(func(t *testing.T, spec []byte, nobjs, memoBase int) {
		if nobjs < 0 || nobjs > 8 {
			return
		}
		refs, err := Prepare(spec, nobjs, memoBase)
		if err != nil || refs == 0 {
			return
		}
		objs := make([][]byte, nobjs)
		for i := range objs {
			objs[i] = []byte("\x80\x05N.")
		}
		out, err := Splice(nil, spec, objs)
		if err != nil {
			t.Fatalf("Prepare accepted %q, Splice failed: %v", spec, err)
		}
		if n, err := Scan(out, 0); err != nil || n != 0 {
			t.Fatalf("spliced %q has %d references (%v)", out, n, err)
		}
	})
}

// BenchmarkSpliceMapTask: Prepare and Splice of one client.map task's spec
// (a dask._task_spec.Task calling a module function, as the helper pickles
// it) in both of the helper's forms, the function in the table.
func BenchmarkSpliceMapTask(b *testing.B) {
	const task = "8005955a000000000000008c0f6461736b2e5f7461736b5f73706563948c045461736b94939429819428892891944e4e4e4b0185944b00518c24696e632d3335666234326236663737616163356164653762373166653032653338363864947d947494622e"
	const taskMemo = "8005955c000000000000008c0f6461736b2e5f7461736b5f73706563948c045461736b94939429819428892891944e4e4e4b0185946a000000408c24696e632d3335666234326236663737616163356164653762373166653032653338363864947d947494622e"
	objs := [][]byte{[]byte("\x80\x05\x95\x1a\x00\x00\x00\x00\x00\x00\x00\x8c\x0emap_stages_mod\x94\x8c\x03inc\x94\x93\x94.")}
	for _, form := range []struct {
		name     string
		hex      string
		memoBase int
	}{{"persistent-ids", task, 0}, {"memo-gets", taskMemo, 1}} {
		spec, err := hex.DecodeString(form.hex)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(form.name+"/prepare", func(b *testing.B) {
			work := make([]byte, len(spec))
			for b.Loop() {
				copy(work, spec)
				if _, err := Prepare(work, len(objs), form.memoBase); err != nil {
					b.Fatal(err)
				}
			}
		})
		prepared := append([]byte(nil), spec...)
		if _, err := Prepare(prepared, len(objs), form.memoBase); err != nil {
			b.Fatal(err)
		}
		b.Run(form.name+"/splice", func(b *testing.B) {
			dst := make([]byte, 0, 512)
			for b.Loop() {
				if _, err := Splice(dst[:0], prepared, objs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
