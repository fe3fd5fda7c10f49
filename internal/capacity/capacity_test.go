package capacity

import "testing"

func TestSize(t *testing.T) {
	for _, c := range []struct {
		name string
		fd   int
		mem  int64
		want int
	}{
		{"descriptors bound, memory unknown", 9936, 0, 9936},
		{"memory bounds: 512 MiB holds 4,096 streams in its half", 100_000, 512 << 20, 4096},
		{"descriptors bound under plenty of memory", 9936, 16 << 30, 9936},
		{"never under the old default", 64, 64 << 20, Floor},
		{"never over what the config accepts", 10_000_000, 1 << 40, Ceiling},
	} {
		if got := Size(c.fd, c.mem); got != c.want {
			t.Errorf("%s: Size(%d, %d) = %d, want %d", c.name, c.fd, c.mem, got, c.want)
		}
	}
}

// TestMaxConcurrency: on this machine the default is within bounds and
// no larger than the connection cap it derives from.
func TestMaxConcurrency(t *testing.T) {
	n := MaxConcurrency()
	if n < Floor || n > Ceiling {
		t.Fatalf("MaxConcurrency() = %d, outside [%d, %d]", n, Floor, Ceiling)
	}
	if fd := max(Connections(), Floor); n > fd {
		t.Errorf("MaxConcurrency() = %d, above the connection cap %d", n, fd)
	}
}

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
