package compat

import "testing"

func TestHashSeedFromEnvFollowsCPython(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "PYTHONHASHSEED" {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		v    string
		seed uint32
	}{{"0", 0}, {"42", 42}, {"4294967295", 4294967295}} {
		seed, drawn, err := HashSeedFromEnv(env(c.v))
		if err != nil || drawn || seed != c.seed {
			t.Errorf("PYTHONHASHSEED=%s: seed %d drawn %v err %v, want %d", c.v, seed, drawn, err, c.seed)
		}
	}
	for _, v := range []string{"-1", "4294967296", "abc", "1.5"} {
		if _, _, err := HashSeedFromEnv(env(v)); err == nil {
			t.Errorf("PYTHONHASHSEED=%s accepted", v)
		}
	}
	// unset and "random" draw a nonzero seed per call (a collision of all
	// ten draws is a 2^-288 event)
	seen := map[uint32]bool{}
	for i, v := range []string{"", "random", "", "random", "", "random", "", "random", "", "random"} {
		seed, drawn, err := HashSeedFromEnv(env(v))
		if err != nil || !drawn || seed == 0 {
			t.Fatalf("draw %d (%q): seed %d drawn %v err %v", i, v, seed, drawn, err)
		}
		seen[seed] = true
	}
	if len(seen) < 2 {
		t.Errorf("ten draws gave one seed: %v", seen)
	}
}
