//go:build containers

package deploy

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// containersConf is what podman needs on a machine like CI's (root without
// CAP_SYS_RESOURCE, no systemd): runc, explicit ulimits (podman's default
// raises nofile past what such a root may), cgroupfs and file events.
const containersConf = `[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
`

// Podman runs podman (and podman-compose) with the test's containers.conf.
type Podman struct {
	env []string
}

var (
	podmanOnce sync.Once
	podmanInst *Podman
	podmanErr  string
)

// needPodman returns a working podman or skips (fails under CI).
func needPodman(t *testing.T) *Podman {
	t.Helper()
	podmanOnce.Do(func() {
		if runtime.GOOS != "linux" {
			podmanErr = "containers are tested on Linux only"
			return
		}
		if os.Geteuid() != 0 {
			// CI runs as root; rootless podman needs subuids, a user
			// session and other networking, which these tests do not set up.
			podmanErr = "the container tests run as root"
			return
		}
		if _, err := exec.LookPath("podman"); err != nil {
			podmanErr = "podman is not installed"
			return
		}
		if _, err := exec.LookPath("runc"); err != nil {
			podmanErr = "runc is not installed"
			return
		}
		dir, err := os.MkdirTemp("", "switchboard-podman-")
		if err != nil {
			podmanErr = err.Error()
			return
		}
		atExit(func() { os.RemoveAll(dir) })
		conf := filepath.Join(dir, "containers.conf")
		if err := os.WriteFile(conf, []byte(containersConf), 0o644); err != nil {
			podmanErr = err.Error()
			return
		}
		p := &Podman{env: append(os.Environ(), "CONTAINERS_CONF="+conf)}
		if out, err := p.output(context.Background(), "", "podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"); err != nil {
			podmanErr = fmt.Sprintf("podman does not work here: %v: %s", err, out)
			return
		}
		podmanInst = p
	})
	if podmanInst == nil {
		unavailable(t, "%s", podmanErr)
	}
	return podmanInst
}

// output runs a command with the podman environment in dir (the repo root
// when empty) and returns its combined output.
func (p *Podman) output(ctx context.Context, dir, name string, args ...string) (string, error) {
	if dir == "" {
		dir = root
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, p.env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must runs podman with args and fails the test on error, logging the
// command the way a reader would type it.
func (p *Podman) must(t testing.TB, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	t.Logf("$ podman %s", strings.Join(args, " "))
	out, err := p.output(ctx, "", "podman", args...)
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, tail(out, 4000))
	}
	return strings.TrimSpace(out)
}

// quiet runs podman for cleanup, ignoring failures.
func (p *Podman) quiet(args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p.output(ctx, "", "podman", args...)
}

// importRootfs makes an image from host files (podman import of a tar
// built here): CI has no registry, so the builder and Redis images are
// assembled from what the host already has. files maps paths in the image
// to host paths ("" makes an empty directory); each executable's shared
// libraries come along.
func (p *Podman) importRootfs(t testing.TB, ref string, files map[string]string, changes ...string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	dir := func(name string, mode int64) {
		for d := filepath.Dir(name); d != "." && d != "/" && !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755})
		}
		if mode != 0 && !seen[name] {
			seen[name] = true
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(name, "/") + "/", Mode: mode})
		}
	}
	add := func(name, host string) {
		data, err := os.ReadFile(host)
		if err != nil {
			t.Fatalf("image %s: %v", ref, err)
		}
		st, err := os.Stat(host)
		if err != nil {
			t.Fatal(err)
		}
		dir(name, 0)
		if seen[name] {
			return
		}
		seen[name] = true
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(name, "/"),
			Mode: int64(st.Mode().Perm()), Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	dir("/tmp", 0o1777)
	dir("/root", 0o700)
	for name, host := range files {
		if host == "" { // an empty directory
			dir(name, 0o755)
			continue
		}
		add(name, host)
		for _, lib := range sharedLibs(t, host) {
			add(lib, lib)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	args := []string{"import"}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	args = append(args, "-", ref)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env, cmd.Stdin = p.env, &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("podman import %s: %v\n%s", ref, err, out)
	}
}

// sharedLibs lists the libraries ldd reports for an executable (none for
// data files or static binaries).
func sharedLibs(t testing.TB, path string) []string {
	out, err := exec.Command("ldd", path).Output()
	if err != nil {
		return nil // "not a dynamic executable"
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "/") {
				libs = append(libs, f)
				break
			}
		}
	}
	return libs
}

// goEnv reads one `go env` value of the toolchain running the tests.
func goEnv(t testing.TB, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", key, err)
	}
	return strings.TrimSpace(string(out))
}
