package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"switchboard/internal/config"
)

// compose.yaml without containers (they run in compose_test.go, tag
// containers): every service is there, every bind-mounted file exists,
// and the gateways' config validates both ways compose runs it.
func TestComposeFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Image       string
			Volumes     []string
			Environment map[string]string
		}
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for _, s := range []string{"redis", "switchboard-1", "switchboard-2", "switchboard-3", "ingress", "worker", "prometheus", "grafana"} {
		if _, ok := f.Services[s]; !ok {
			t.Errorf("compose.yaml has no service %s", s)
		}
	}
	for name, s := range f.Services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
	}
	for _, role := range []string{"ingress", "worker"} {
		if env := f.Services[role].Environment; env["QUEUE_MODE"] != "redis" || env["SWITCHBOARD_ROLE"] != role {
			t.Errorf("service %s: environment %v, want QUEUE_MODE=redis and SWITCHBOARD_ROLE=%s", role, env, role)
		}
	}

	cfgData, err := os.ReadFile(filepath.Join(root, "deploy/compose/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"off", "redis"} {
		t.Run("queue "+mode, func(t *testing.T) {
			t.Setenv("QUEUE_MODE", mode)
			t.Setenv(config.EnvRedisURL, "redis://redis:6379/0")
			if _, err := config.Parse(cfgData, "deploy/compose/config.yaml"); err != nil {
				t.Fatalf("the compose config does not validate:\n%v", err)
			}
		})
	}
}
