package sim

import "testing"

// The digest is a pure function of what the engine decided: equal for two
// runs of one configuration, different once a placement differs (another
// seed picks other replica holders, so other transfers and messages).
func TestOutboxDigest(t *testing.T) {
	g := mustSynthetic(t, "tree:200")
	cfg := Config{Workers: 5, Threads: 2, Mode: "withholding", Digest: true}
	a, b := mustRun(t, g, cfg), mustRun(t, g, cfg)
	if a.OutboxDigest == "" || a.OutboxDigest != b.OutboxDigest {
		t.Fatalf("digests of two identical runs: %q, %q", a.OutboxDigest, b.OutboxDigest)
	}
	cfg.Mode = "off"
	if c := mustRun(t, g, cfg); c.OutboxDigest == a.OutboxDigest {
		t.Errorf("modes withholding and off gave one digest %q", c.OutboxDigest)
	}
	cfg.Digest = false
	if d := mustRun(t, g, cfg); d.OutboxDigest != "" {
		t.Errorf("digest %q without Config.Digest", d.OutboxDigest)
	}
}
