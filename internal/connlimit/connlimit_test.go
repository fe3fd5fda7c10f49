package connlimit

import (
	"io"
	"net"
	"testing"
	"time"
)

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

// A wrapped connection keeps TCP's half-close, which net/http uses so that
// a client still sending reads the refusal instead of a reset.
func TestConnKeepsCloseWrite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, 1, 0, time.Second)
	defer l.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			_, _ = io.ReadAll(c)
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		t.Fatal("CloseWrite lost by the wrapper")
	}
}
