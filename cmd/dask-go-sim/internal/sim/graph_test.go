package sim

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"daskgo/protocol"
)

const head = `{"format": "daskgo-sim-graph/1", "workload": "w", "scale": "small", "n_tasks": 3, "data_bytes": 100}` + "\n"

func TestReadGraph(t *testing.T) {
	src := head +
		`[["x-abc",0],0,[],0.5,100,100]` + "\n" +
		`[["x-abc",1],1,[],0.5,100,100]` + "\n" +
		`["sum-1",2,[0,1],0.01,8,0]` + "\n"
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(src))
	zw.Close()
	path := filepath.Join(t.TempDir(), "g.jsonl.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := LoadGraph(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := protocol.KeyOf([]any{"x-abc", int64(1)})
	if len(g.Tasks) != 3 || g.Tasks[1].Key != want || g.Tasks[2].Key != protocol.StrKey("sum-1") {
		t.Fatalf("tasks %+v", g.Tasks)
	}
	if g.Tasks[2].Deps[1] != 1 || g.Tasks[0].Duration != 0.5 || g.Tasks[2].NBytes != 8 || g.Tasks[0].Transient != 100 {
		t.Fatalf("fields %+v", g.Tasks)
	}
	if s := g.Sinks(); len(s) != 1 || s[0] != 2 {
		t.Fatalf("sinks %v", s)
	}
	r := mustRun(t, g, Config{Workers: 2, Threads: 1, Mode: "coassign", Validate: true})
	if r.MakespanS < 0.51 {
		t.Errorf("makespan %.3f s shorter than root + sum", r.MakespanS)
	}
}

func TestReadGraphRejects(t *testing.T) {
	for name, src := range map[string]string{
		"empty":      "",
		"format":     `{"format": "other"}` + "\n",
		"short line": head + `["a",0,[]]` + "\n",
		"dep range":  head + `["a",0,[5],1,1,0]` + "\n",
		"self dep":   head + `["a",0,[0],1,1,0]` + "\n",
		"duplicate":  head + `["a",0,[],1,1,0]` + "\n" + `["a",1,[],1,1,0]` + "\n",
		"negative":   head + `["a",0,[],-1,1,0]` + "\n",
		"cycle":      head + `["a",0,[1],1,1,0]` + "\n" + `["b",1,[0],1,1,0]` + "\n",
		"bad key":    head + `[null,0,[],1,1,0]` + "\n",
		"not json":   head + "[[[\n",
	} {
		if _, err := ReadGraph(strings.NewReader(src)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
