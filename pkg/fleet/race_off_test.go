//go:build !race

package fleet_test

// publishPause paces the stress tests' publishers (race_on_test.go).
const publishPause = 1_000_000 // ns
