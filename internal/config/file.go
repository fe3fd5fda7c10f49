package config

import (
	"fmt"
	"io"
	"os"
)

// Bounds of the files the gateway reads whole. A real config is a few KB
// and a keys file about 150 bytes a key; a path that names something
// endless (a symlink to /dev/zero, a device) must fail at the bound
// instead of growing the process until it is killed.
const (
	MaxConfigBytes   = 16 << 20
	MaxKeysFileBytes = 64 << 20
)

// ReadFile reads the file at path whole, refusing one larger than limit
// bytes without reading more than limit+1 of it.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limit {
		return nil, tooLarge(path, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(path, limit)
	}
	return b, nil
}

func tooLarge(path string, limit int64) error {
	return fmt.Errorf("%s: larger than %d MiB; refusing to read it (is it the right file?)", path, limit>>20)
}
