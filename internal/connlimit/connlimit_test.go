package connlimit

import "testing"

func TestFromNofile(t *testing.T) {
	tests := []struct {
		nofile uint64
		want   int
	}{
		{256, 64},         // tiny limits still serve some
		{1024, 448},       // (1024-128)/2
		{1 << 20, 524224}, // a container's usual hard limit
		{^uint64(0), 10_000_000},
	}
	for _, tc := range tests {
		if got := fromNofile(tc.nofile); got != tc.want {
			t.Errorf("fromNofile(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
}
