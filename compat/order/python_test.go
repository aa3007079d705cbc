package order

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"daskgo/compat/venv"
	"daskgo/protocol"
)

// runTestdataPython runs testdata/<script> under PYTHONHASHSEED=0 (every
// expectation here is defined for a fixed hash function) and returns stdout.
func runTestdataPython(t testing.TB, script string, args ...string) []byte {
	t.Helper()
	return runTestdataPythonSeed(t, 0, script, args...)
}

// runTestdataPythonSeed is runTestdataPython under PYTHONHASHSEED=seed.
func runTestdataPythonSeed(t testing.TB, seed uint32, script string, args ...string) []byte {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "testdata")
	// Read the scripts through this process so that go test's result cache
	// notices when they change (it cannot see what the child opens).
	for _, f := range []string{script, "keycodec.py"} {
		if _, err := os.ReadFile(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(venv.Python(t), append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("PYTHONHASHSEED=%d", seed))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	return out
}

// jsonLines decodes one JSON value per non-empty line into a fresh T.
func jsonLines[T any](t testing.TB, data []byte) []T {
	t.Helper()
	var out []T
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("line %d: %v: %.200s", i+1, err, line)
		}
		out = append(out, v)
	}
	return out
}

// testKey is testdata/keycodec.py's JSON form of a dask key.
type testKey struct {
	S *string   `json:"s"`
	I *string   `json:"i"`
	F *string   `json:"f"`
	T []testKey `json:"t"`
}

func (k testKey) value() (any, error) {
	switch {
	case k.S != nil:
		return *k.S, nil
	case k.I != nil:
		n, ok := new(big.Int).SetString(*k.I, 10)
		if !ok {
			return nil, fmt.Errorf("bad int %q", *k.I)
		}
		if n.IsInt64() {
			return n.Int64(), nil
		}
		if n.IsUint64() {
			return n.Uint64(), nil
		}
		return nil, fmt.Errorf("int %s does not fit a msgpack key", n)
	case k.F != nil:
		b, err := hex.DecodeString(*k.F)
		if err != nil || len(b) != 8 {
			return nil, fmt.Errorf("bad float bits %q", *k.F)
		}
		return float64frombits(binary.BigEndian.Uint64(b)), nil
	default:
		items := make([]any, len(k.T))
		for i, e := range k.T {
			v, err := e.value()
			if err != nil {
				return nil, err
			}
			items[i] = v
		}
		return items, nil
	}
}

func (k testKey) key(t testing.TB) protocol.Key {
	t.Helper()
	v, err := k.value()
	if err != nil {
		t.Fatal(err)
	}
	key, err := protocol.KeyOf(v)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func (k testKey) String() string {
	b, _ := json.Marshal(k)
	return strings.TrimSpace(string(b))
}
