//go:build race

package main

// raceEnabled makes TestMain build the binary with -race too, so it reuses
// the race-instrumented packages the test binary was just compiled from.
const raceEnabled = true
