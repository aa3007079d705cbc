package server

import (
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"go.yaml.in/yaml/v3"

	"daskgo/protocol"
)

// msgpackToYAML writes a msgpack document as write_state's YAML writer
// does (yaml.dump of the state with tuples as lists): block style, every
// mapping's keys sorted (PyYAML's sort_keys default), readable by
// yaml.safe_load.
func msgpackToYAML(doc []byte, w io.Writer) error {
	v, err := protocol.Decode([][]byte{doc})
	if err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(yamlNode(v)); err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	return enc.Close()
}

func scalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

func yamlNode(v any) *yaml.Node {
	switch x := v.(type) {
	case nil:
		return scalar("!!null", "null")
	case bool:
		return scalar("!!bool", strconv.FormatBool(x))
	case int64:
		return scalar("!!int", strconv.FormatInt(x, 10))
	case uint64:
		return scalar("!!int", strconv.FormatUint(x, 10))
	case float64:
		return scalar("!!float", yamlFloat(x))
	case string:
		return scalar("!!str", x)
	case []byte:
		return scalar("!!binary", base64.StdEncoding.EncodeToString(x))
	case protocol.Key:
		return yamlNode(x.Value())
	case []any:
		return yamlSeq(x)
	case protocol.Set:
		return yamlSeq(x)
	case *protocol.Map:
		return yamlMap(x)
	}
	return scalar("!!str", protocol.String(v))
}

func yamlSeq(items []any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, it := range items {
		n.Content = append(n.Content, yamlNode(it))
	}
	return n
}

func yamlMap(m *protocol.Map) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if m == nil {
		return scalar("!!null", "null")
	}
	entries := append([]protocol.Entry(nil), m.Entries...)
	sort.SliceStable(entries, func(i, j int) bool { return yamlKeyLess(entries[i].Key, entries[j].Key) })
	for _, e := range entries {
		n.Content = append(n.Content, yamlNode(e.Key), yamlNode(e.Value))
	}
	return n
}

// yamlKeyLess orders keys as sorted() would: numbers, then strings (a
// dump's keys are all of one kind; PyYAML would fail on a mix).
func yamlKeyLess(a, b any) bool {
	fa, aNum := toFloat(a)
	fb, bNum := toFloat(b)
	switch {
	case aNum && bNum:
		return fa < fb
	case aNum != bNum:
		return aNum
	}
	sa, aStr := a.(string)
	sb, bStr := b.(string)
	if aStr && bStr {
		return sa < sb
	}
	return protocol.String(a) < protocol.String(b)
}

// yamlFloat is PyYAML's float: .inf, -.inf, .nan, else the shortest form
// with a decimal point or exponent.
func yamlFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	case math.IsNaN(f):
		return ".nan"
	}
	return protocol.FloatRepr(f)
}
