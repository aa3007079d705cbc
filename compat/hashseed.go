package compat

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
)

// HashSeedFromEnv picks the PYTHONHASHSEED whose string hashing the
// scheduler's dask.order reproduces, as CPython picks its own
// (Python/initconfig.c, config_init_hash_seed): the PYTHONHASHSEED value of
// this process's environment when it is a number in [0, 4294967295];
// unset, empty or "random": a random one, drawn per scheduler process. A
// Python scheduler runs dask.order under a random secret per process too,
// and on some graphs the priorities it gives, and the workers' memory that
// follows from them, differ from seed to seed (dot-product: 2.63 GiB peak
// under seed 0, 2.47 over random seeds); a fixed seed would give every run
// the same draw, lucky or not. random reports whether the seed was drawn.
func HashSeedFromEnv(getenv func(string) string) (seed uint32, random bool, err error) {
	v := getenv("PYTHONHASHSEED")
	if v == "" || v == "random" {
		var b [4]byte
		for seed == 0 { // 0 switches randomization off: not a draw
			if _, err := rand.Read(b[:]); err != nil {
				return 0, false, fmt.Errorf("draw a hash seed: %w", err)
			}
			seed = binary.LittleEndian.Uint32(b[:])
		}
		return seed, true, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, false, fmt.Errorf("PYTHONHASHSEED must be \"random\" or an integer in range [0; 4294967295], not %q", v)
	}
	return uint32(n), false, nil
}
