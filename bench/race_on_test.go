//go:build race

package main

// raceEnabled builds the gateway with -race too, so that it reuses the
// packages `go test -race` has already compiled.
const raceEnabled = true
