//go:build containers

package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// maxImageBytes is the size the image must stay under (issue: < 30 MB).
const maxImageBytes = 30_000_000

var (
	imageOnce sync.Once
	imageRef  string
	imageErr  string
	// imageRev is the REVISION the image was built with (HEAD may move
	// while the tests run).
	imageRev string
)

// imageVersion and imageRevision are baked in by the build under test.
const imageVersion = "0.0.0-citest"

func gitRevision() string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// buildImage builds the repository's Dockerfile once for the package's
// tests and returns its reference.
//
// CI cannot pull golang:*, so the builder stage runs on an image made from
// the host's files: /bin/sh, its libraries and the CA bundle, with the
// host's Go toolchain, module cache and build cache mounted. Everything
// else — the Dockerfile, its stages, flags and runtime image — is what
// users build. The mounted caches only make the build fast; they do not
// change its output.
func buildImage(t *testing.T, p *Podman) string {
	t.Helper()
	imageOnce.Do(func() {
		ref := fmt.Sprintf("localhost/switchboard:citest-%d", os.Getpid())
		builder := fmt.Sprintf("localhost/switchboard-go-builder:citest-%d", os.Getpid())
		if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err != nil {
			imageErr = "the host has no CA bundle to give the builder (apt-get install ca-certificates)"
			return
		}
		p.importRootfs(t, builder, map[string]string{
			"/bin/sh":                            "/bin/sh",
			"/etc/ssl/certs/ca-certificates.crt": "/etc/ssl/certs/ca-certificates.crt",
		}, "ENV PATH=/go/bin:/usr/local/go/bin:/usr/bin:/bin", "ENV GOPATH=/go", "ENV HOME=/root")
		atExit(func() { p.quiet("rmi", "-f", builder) })
		start := time.Now()
		imageRev = gitRevision()
		args := []string{"build", "--format", "docker", "--layers=false", "--network", "host",
			"--build-arg", "GO_IMAGE=" + builder,
			"--build-arg", "VERSION=" + imageVersion, "--build-arg", "REVISION=" + imageRev,
			"-v", goEnv(t, "GOROOT") + ":/usr/local/go:ro",
			"-v", goEnv(t, "GOMODCACHE") + ":/go/pkg/mod",
			"-v", goEnv(t, "GOCACHE") + ":/root/.cache/go-build",
			"-t", ref, "."}
		p.must(t, 8*time.Minute, args...)
		atExit(func() { p.quiet("rmi", "-f", ref) })
		t.Logf("image built in %s", time.Since(start).Round(time.Second))
		imageRef = ref
	})
	if imageRef == "" {
		if imageErr == "" {
			imageErr = "the image build failed in an earlier test"
		}
		t.Fatal(imageErr)
	}
	return imageRef
}

type imageConfig struct {
	Size int64
	// Healthcheck is top-level in podman's inspect output.
	Healthcheck *struct{ Test []string }
	Config      struct {
		User         string
		ExposedPorts map[string]any
		Volumes      map[string]any
		Env          []string
		Labels       map[string]string
		Entrypoint   []string
	}
}

func TestImage(t *testing.T) {
	p := needPodman(t)
	ref := buildImage(t, p)

	// The image as built: small, non-root, health-checked, with volumes.
	var imgs []imageConfig
	if err := json.Unmarshal([]byte(p.must(t, time.Minute, "image", "inspect", ref)), &imgs); err != nil || len(imgs) != 1 {
		t.Fatalf("image inspect: %v", err)
	}
	img := imgs[0]
	t.Logf("image size %.1f MB", float64(img.Size)/1e6)
	checks := []struct {
		what string
		ok   bool
	}{
		{fmt.Sprintf("size %d under %d bytes", img.Size, maxImageBytes), img.Size > 0 && img.Size < maxImageBytes},
		{"user 1000:1000, got " + img.Config.User, img.Config.User == "1000:1000"},
		{"EXPOSE 4567", img.Config.ExposedPorts["4567/tcp"] != nil},
		{"volumes /config and /data", img.Config.Volumes["/config"] != nil && img.Config.Volumes["/data"] != nil},
		{"HEALTHCHECK through `switchboard healthcheck` (kept by --format docker)",
			img.Healthcheck != nil && strings.Contains(strings.Join(img.Healthcheck.Test, " "), "switchboard healthcheck")},
		{"version label", img.Config.Labels["org.opencontainers.image.version"] == imageVersion},
		{"STATE_DIR=/data", contains(img.Config.Env, "STATE_DIR=/data")},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("image: want %s", c.what)
		}
	}
	if v := p.must(t, time.Minute, "run", "--rm", "--network", "none", ref, "version"); !strings.Contains(v, imageVersion) || !strings.Contains(v, imageRev) {
		t.Errorf("switchboard version in the image = %q, want version and revision baked in", v)
	}

	// Run it on 127.0.0.1 with the demo config.
	port := freePort(t)
	name := fmt.Sprintf("switchboard-citest-%d", os.Getpid())
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p.must(t, time.Minute, "run", "-d", "--name", name, "--network", "host",
		"-e", "BIND=127.0.0.1", "-e", "PORT="+strconv.Itoa(port),
		"-v", filepath.Join(root, "examples/demo.yaml")+":/config/config.yaml:ro", ref)
	t.Cleanup(func() { p.quiet("rm", "-f", "-v", name) })
	waitHealthy(t, base+"/health")

	t.Run("health and a chat completion through the mock provider", func(t *testing.T) {
		resp, err := http.Get(base + "/health")
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(resp.Body); resp.StatusCode != 200 || !strings.Contains(body, `"ok"`) {
			t.Fatalf("/health: %d %s", resp.StatusCode, body)
		}
		resp.Body.Close()
		resp, err = http.Post(base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 ||
			len(out.Choices) == 0 || out.Choices[0].Message.Content == "" {
			t.Fatalf("chat completion: %d %v %+v", resp.StatusCode, err, out)
		}
		if resp.Header.Get("X-Switchboard-Provider") == "" {
			t.Error("no X-Switchboard-Provider header")
		}
	})

	t.Run("podman healthcheck run", func(t *testing.T) {
		p.must(t, time.Minute, "healthcheck", "run", name)
		if st := p.must(t, time.Minute, "inspect", "--format", "{{.State.Health.Status}}", name); st != "healthy" {
			t.Fatalf("health status %q after a passing check", st)
		}
	})

	t.Run("runs as UID 1000", func(t *testing.T) {
		pid := p.must(t, time.Minute, "inspect", "--format", "{{.State.Pid}}", name)
		status, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "Uid:" {
				if f[1] != "1000" || f[2] != "1000" {
					t.Fatalf("gateway process %s", line)
				}
				return
			}
		}
		t.Fatal("no Uid line in /proc status")
	})

	t.Run("SIGTERM drains a stream in flight and exits 0 within the drain bound", func(t *testing.T) {
		// demo-chat's primary (mock-slow) takes about 1.7 s per answer.
		resp, err := http.Post(base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"demo-chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		if !sc.Scan() {
			t.Fatalf("no first stream line: %v", sc.Err())
		}
		start := time.Now()
		p.must(t, time.Minute, "kill", "--signal", "TERM", name)
		done := false
		for sc.Scan() {
			if sc.Text() == "data: [DONE]" {
				done = true
			}
		}
		if !done {
			t.Errorf("the stream in flight at SIGTERM did not finish: %v", sc.Err())
		}
		code := p.must(t, time.Minute, "wait", name)
		took := time.Since(start)
		// timeouts.shutdown is 30 s in the demo config (the default).
		if code != "0" || took > 30*time.Second {
			t.Fatalf("exit code %s after %s, want 0 within 30 s", code, took.Round(time.Millisecond))
		}
		t.Logf("exited 0 %s after SIGTERM", took.Round(time.Millisecond))
		if logs := p.must(t, time.Minute, "logs", name); !strings.Contains(logs, "switchboard stopped") {
			t.Errorf("logs lack the clean stop:\n%s", tail(logs, 2000))
		}
	})
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
