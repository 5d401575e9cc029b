package faultnet

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// SeedEnv is the environment variable that replays a run: set it to the
// seed a failing run printed.
const SeedEnv = "FAULTNET_SEED"

// SeedFromEnv returns the seed in FAULTNET_SEED, or else a fresh one drawn
// from the clock; replay says whether it came from the environment.
func SeedFromEnv() (seed int64, replay bool, err error) {
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("faultnet: %s=%q is not an integer: %w", SeedEnv, s, err)
		}
		return v, true, nil
	}
	return time.Now().UnixNano(), false, nil
}
