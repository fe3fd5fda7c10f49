package connlimit

import (
	"io"
	"net"
	"testing"
	"time"
)

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
