package server

import (
	"strings"
	"testing"

	"daskgo/protocol"
)

func profNode(id string, count int64, children ...*protocol.Map) *protocol.Map {
	kids := &protocol.Map{}
	for _, c := range children {
		kids.Entries = append(kids.Entries, protocol.Entry{Key: c.Get("identifier"), Value: c})
	}
	return protocol.NewMap("count", count, "children", kids, "identifier", id,
		"description", protocol.NewMap("filename", id+".py", "name", id, "line_number", int64(1), "line", ""))
}

// mergeProfiles is distributed.profile.merge: counts add up, children
// merge by identifier in the order first seen, the first description
// stays; no state is the empty profile.
func TestMergeProfilesAsDistributed(t *testing.T) {
	a := profNode("root", 3, profNode("f", 2, profNode("g", 2)), profNode("h", 1))
	b := profNode("root", 5, profNode("k", 1), profNode("f", 4, profNode("g", 1), profNode("z", 3)))
	m, err := mergeProfiles([]*protocol.Map{a, b}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m.Get("count") != int64(8) || m.Get("identifier") != "root" {
		t.Fatalf("root: %s", protocol.String(m))
	}
	kids := m.Get("children").(*protocol.Map)
	var order []string
	for _, e := range kids.Entries {
		order = append(order, e.Key.(string))
	}
	if strings.Join(order, ",") != "f,h,k" {
		t.Fatalf("children order %v, want f,h,k", order)
	}
	f := kids.Entries[0].Value.(*protocol.Map)
	if f.Get("count") != int64(6) {
		t.Fatalf("f count %v, want 6", f.Get("count"))
	}
	g := f.Get("children").(*protocol.Map).Entries[0].Value.(*protocol.Map)
	if g.Get("count") != int64(3) || f.Get("children").(*protocol.Map).Len() != 2 {
		t.Fatalf("f's children: %s", protocol.String(f.Get("children")))
	}
	empty, _ := mergeProfiles(nil, 0)
	if empty.Get("identifier") != "root" || empty.Get("count") != int64(0) {
		t.Fatalf("empty: %s", protocol.String(empty))
	}
	if _, err := mergeProfiles([]*protocol.Map{a, profNode("other", 1)}, 0); err == nil {
		t.Fatal("different identifiers merged")
	}
}
