//go:build !unix

package capacity

// Connections is a fixed cap where the descriptor limit cannot be read.
func Connections() int { return 1024 }
