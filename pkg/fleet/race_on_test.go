//go:build race

package fleet_test

// publishPause paces the stress tests' publishers: under the race
// detector a box settles several times slower, and a publisher far faster
// than the boxes only measures how far behind they fall.
const publishPause = 20_000_000 // ns
