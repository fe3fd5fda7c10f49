//go:build !unix

package connlimit

// DefaultMax is a fixed cap where the descriptor limit cannot be read.
func DefaultMax() int { return 1024 }
