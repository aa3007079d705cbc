package pickle

import (
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"

	"daskgo/compat/venv"
	"daskgo/protocol"
)

// unpickle loads each hex pickle with the stock interpreter and returns
// type name and str() per pickle, one line each.
func unpickle(t *testing.T, pickles ...[]byte) []string {
	t.Helper()
	var args []string
	for _, p := range pickles {
		args = append(args, hex.EncodeToString(p))
	}
	script := `
import pickle, sys
for h in sys.argv[1:]:
    obj = pickle.loads(bytes.fromhex(h))
    print(type(obj).__module__ + "." + type(obj).__name__ + "|" + str(obj).replace("\n", " "))
`
	out, err := exec.Command(venv.Python(t), append([]string{"-c", script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("python unpickle: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func TestPicklesLoadInStockPython(t *testing.T) {
	tupleKey, err := protocol.KeyOf([]any{"sum-abc", int64(3), 2.5})
	if err != nil {
		t.Fatal(err)
	}
	got := unpickle(t,
		KilledWorker(protocol.StrKey("die-1"), "tcp://127.0.0.1:4000", 3),
		KilledWorker(tupleKey, "tcp://10.0.0.1:1", 0),
		Exception("builtins", "MemoryError", "too big"),
		None(),
		NoValidWorkerError(protocol.StrKey("gpu-1"), []string{"10.0.0.1"}, nil, map[string]float64{"GPU": 1}, 1.5),
		NoWorkerError(tupleKey, 60),
	)
	want := []string{
		"distributed.scheduler.KilledWorker|Attempted to run task 'die-1' on 4 different workers, but all those workers died while running it. The last worker that attempt to run the task was tcp://127.0.0.1:4000.",
		"distributed.scheduler.KilledWorker|Attempted to run task ('sum-abc', 3, 2.5) on 1 different workers",
		"builtins.MemoryError|too big",
		"builtins.NoneType|None",
		"distributed.scheduler.NoValidWorkerError|Attempted to run task 'gpu-1' but timed out after 1.50 s waiting for a valid worker matching all restrictions.  Restrictions: host_restrictions={'10.0.0.1'} worker_restrictions=set() resource_restrictions={'GPU': 1.0}",
		"distributed.scheduler.NoWorkerError|Attempted to run task ('sum-abc', 3, 2.5) but timed out after 60.00 s waiting without any running workers.",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("pickle %d:\n got %q\nwant prefix %q", i, got[i], want[i])
		}
	}
}

func TestLargeIntsInKeys(t *testing.T) {
	k, err := protocol.KeyOf([]any{"x", int64(1) << 40, int64(-5)})
	if err != nil {
		t.Fatal(err)
	}
	got := unpickle(t, KilledWorker(k, "tcp://a:1", 1))
	if !strings.Contains(got[0], "('x', 1099511627776, -5)") {
		t.Fatalf("got %q", got[0])
	}
}
