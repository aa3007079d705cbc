package scheduler

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Transcript tests, in the manner of etcd raft's interaction tests: each
// file in testdata/*.txt is a story of stimuli, one command a block, and
// after each command the outbox it produced (or the state it asks for),
// rendered in a stable, readable form with each placement's reason:
//
//	new saturation=1.1
//	add-worker w1 nthreads=2
//	update-graph roots(x,4)
//	----
//	w1: compute-task x-0 prio=(0,0,0) reason=free-slot
//	...
//
// A command's output is what follows "----" up to the next blank line.
// `go test ./scheduler -run TestTranscripts -rewrite` writes the outputs
// the engine gives now into the files, to be reviewed as a diff. The
// commands (transcript_cmds_test.go) are the stimuli: add-worker,
// update-graph, finish, tick, steal-tick, story, ...

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of testdata/*.txt transcripts")

func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in testdata/ (%v)", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runTranscript(t, f) })
	}
}

// block is one command of a transcript and its expected output.
type block struct {
	pre    []string // comments and blank lines before the command
	cmd    string
	line   int
	output string
}

func parseTranscript(t *testing.T, path string) []block {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []block
	var cur *block
	var pre []string
	inOutput := false
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case inOutput && line == "":
			inOutput = false
			cur = nil
		case inOutput:
			cur.output += line + "\n"
		case line == "----":
			if cur == nil {
				t.Fatalf("%s:%d: ---- without a command", path, n)
			}
			inOutput = true
		case line == "" || strings.HasPrefix(line, "#"):
			pre = append(pre, line)
		case cur != nil:
			t.Fatalf("%s:%d: a command needs a ---- after it: %q", path, n, line)
		default:
			blocks = append(blocks, block{pre: pre, cmd: line, line: n})
			pre = nil
			cur = &blocks[len(blocks)-1]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil && !inOutput {
		t.Fatalf("%s: the last command has no ----", path)
	}
	if len(pre) > 0 {
		blocks = append(blocks, block{pre: pre})
	}
	return blocks
}

func runTranscript(t *testing.T, path string) {
	blocks := parseTranscript(t, path)
	r := &transcript{t: t}
	var out strings.Builder
	failed := false
	for i := range blocks {
		b := &blocks[i]
		for _, p := range b.pre {
			out.WriteString(p + "\n")
		}
		if b.cmd == "" {
			continue
		}
		got := r.run(b.cmd, fmt.Sprintf("%s:%d", path, b.line))
		out.WriteString(b.cmd + "\n----\n" + got + "\n") // the blank line ends the output
		if got != b.output && !*rewrite {
			t.Errorf("%s:%d: %s\n--- want\n%s--- got\n%s", path, b.line, b.cmd, b.output, got)
			failed = true
		}
	}
	if *rewrite {
		text := strings.TrimRight(out.String(), "\n") + "\n"
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if failed {
		t.Logf("if the new outputs are right: go test ./scheduler -run 'TestTranscripts/%s' -rewrite, and review the diff",
			strings.TrimSuffix(filepath.Base(path), ".txt"))
	}
}
