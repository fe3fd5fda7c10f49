//go:build clients

package clients

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	installOnce sync.Once
	installBin  string
	installErr  error
)

// agentBin returns the node_modules/.bin directory holding claude, gemini
// and codex at the versions package-lock.json pins, installing them on
// first use.
func agentBin() (string, error) {
	installOnce.Do(func() { installBin, installErr = install() })
	return installBin, installErr
}

// cacheBase is where installs are kept, outside the repository.
func cacheBase() (string, error) {
	if d := os.Getenv("SWITCHBOARD_CLIENTS_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir() // $XDG_CACHE_HOME, else ~/.cache
	if err != nil {
		return "", fmt.Errorf("no cache directory (set SWITCHBOARD_CLIENTS_DIR): %v", err)
	}
	return filepath.Join(d, "switchboard-clients"), nil
}

// install runs `npm ci` for this directory's lock file into
// <cache>/<hash of package.json and package-lock.json>, once: a later run
// with the same lock reuses it; a new lock gets a fresh directory and the
// old ones are removed. Install scripts are off (gemini-cli's optional
// node-pty and keytar would compile native code); Claude Code's own
// postinstall, which only links its platform binary, is run by hand.
func install() (string, error) {
	pkg, err := os.ReadFile("package.json")
	if err != nil {
		return "", err
	}
	lock, err := os.ReadFile("package-lock.json")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append(append(pkg, 0), lock...))
	base, err := cacheBase()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, hex.EncodeToString(sum[:])[:16])
	bin := filepath.Join(dir, "node_modules", ".bin")
	stamp := filepath.Join(dir, ".installed")
	if _, err := os.Stat(stamp); err == nil {
		return bin, nil
	}
	if err := checkNode(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Two runs at once install once: the second waits for the first.
	lf, err := os.OpenFile(filepath.Join(base, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(stamp); err == nil {
		return bin, nil
	}
	if err := os.RemoveAll(filepath.Join(dir, "node_modules")); err != nil {
		return "", err
	}
	for name, b := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	if err := run(ctx, dir, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"); err != nil {
		return "", fmt.Errorf("npm ci in %s: %v", dir, err)
	}
	if err := run(ctx, filepath.Join(dir, "node_modules", "@anthropic-ai", "claude-code"), "node", "install.cjs"); err != nil {
		return "", fmt.Errorf("claude-code postinstall: %v", err)
	}
	for name, want := range map[string]string{"claude": "2.1.332", "gemini": "0.61.0", "codex": "0.171.0"} {
		out, err := exec.CommandContext(ctx, filepath.Join(bin, name), "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			return "", fmt.Errorf("%s --version: %v %q (want %s)", name, err, out, want)
		}
	}
	fmt.Fprintf(os.Stderr, "clients: installed the agents into %s in %.0fs\n", dir, time.Since(start).Seconds())
	if err := os.WriteFile(stamp, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", err
	}
	// Each install is about 900 MB: older locks' installs go.
	if old, err := os.ReadDir(base); err == nil {
		for _, e := range old {
			if e.IsDir() && e.Name() != filepath.Base(dir) {
				os.RemoveAll(filepath.Join(base, e.Name()))
			}
		}
	}
	return bin, nil
}

// checkNode fails clearly when node or npm is missing or node is too old
// for gemini-cli (20).
func checkNode() error {
	if _, err := exec.LookPath("npm"); err != nil {
		return fmt.Errorf("npm not found: install Node.js 20+ and npm (./scripts/test installs them with apt-get as root)")
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return fmt.Errorf("node --version: %v", err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if major < 20 {
		return fmt.Errorf("node %s is too old: gemini-cli 0.61 needs Node.js 20 or later", v)
	}
	return nil
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, tail(string(out), 2000))
	}
	return nil
}
