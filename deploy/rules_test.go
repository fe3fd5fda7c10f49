package deploy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// alertFile is deploy/prometheus/alerts.yml as Prometheus reads it.
type alertFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert       string
			Expr        string
			For         string
			Labels      map[string]string
			Annotations map[string]string
		}
	}
}

func readAlerts(t testing.TB) alertFile {
	t.Helper()
	var f alertFile
	data, err := os.ReadFile(filepath.Join(root, "deploy/prometheus/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	return f
}

// dashboard is the part of deploy/grafana/dashboards/switchboard.json the
// tests read.
type dashboard struct {
	UID    string
	Title  string
	Panels []struct {
		Type       string
		Title      string
		Datasource *struct{ Type, UID string }
		Targets    []struct {
			Expr  string
			RefID string `json:"refId"`
		}
	}
}

func readDashboard(t testing.TB) dashboard {
	t.Helper()
	var d dashboard
	data, err := os.ReadFile(filepath.Join(root, "deploy/grafana/dashboards/switchboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("switchboard.json: %v", err)
	}
	return d
}

func needPromtool(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		unavailable(t, "promtool is not installed (Debian package prometheus)")
	}
	return bin
}

func promtool(t *testing.T, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = filepath.Join(root, "deploy/prometheus")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("$ promtool %s\n%s", strings.Join(args, " "), out)
}

// The rules load, their unit tests pass, the compose Prometheus config is
// valid, and every alert the issue asks for exists and is unit-tested.
func TestAlertRules(t *testing.T) {
	bin := needPromtool(t)
	promtool(t, bin, "check", "rules", "alerts.yml")
	promtool(t, bin, "test", "rules", "alerts_test.yml")
	promtool(t, bin, "check", "config", "prometheus.yml")

	tests, err := os.ReadFile(filepath.Join(root, "deploy/prometheus/alerts_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			have[r.Alert] = true
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a severity label, a summary and a description", r.Alert)
			}
			// A rule unit-tested only for silence would prove nothing.
			if !regexp.MustCompile(`alertname: ` + r.Alert + `\s+exp_alerts:\s+- exp_labels`).Match(tests) {
				t.Errorf("%s: alerts_test.yml has no case where it fires", r.Alert)
			}
		}
	}
	for _, want := range []string{"SwitchboardProviderCircuitOpen", "SwitchboardProviderQuotaPaused", "SwitchboardErrorRatioHigh",
		"SwitchboardBudgetNearlyExhausted", "SwitchboardRedisDown", "SwitchboardQueueBacklog", "SwitchboardSaturated"} {
		if !have[want] {
			t.Errorf("alerts.yml lacks %s", want)
		}
	}
}

// The dashboard's queries are valid PromQL: promtool checks them as
// recording rules ($__rate_interval, Grafana's, becomes 5m).
func TestDashboardQueries(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard needs a uid and a title (provisioning keys on the uid)")
	}
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: needs the ${datasource} variable and at least one query", p.Title)
		}
		for _, tg := range p.Targets {
			rules = append(rules, rule{Record: "dashboard:check", Expr: strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m")})
		}
	}
	bin := needPromtool(t)
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, bin, "check", "rules", path)

	// Every area the issue names has a panel.
	var titles []string
	for _, p := range d.Panels {
		titles = append(titles, strings.ToLower(p.Title))
	}
	all := strings.Join(titles, " | ")
	for _, want := range []string{"requests", "latency", "time to first token", "tokens per second", "failures by reason",
		"circuits", "pauses", "refusals", "spend per tenant", "redis up"} {
		if !strings.Contains(all, want) {
			t.Errorf("no panel about %q in: %s", want, all)
		}
	}
}

// metricNames are the switchboard_* names the expressions use, sorted.
func metricNames(exprs []string) []string {
	re := regexp.MustCompile(`\bswitchboard_[a-zA-Z0-9_]+`)
	set := map[string]bool{}
	for _, e := range exprs {
		for _, n := range re.FindAllString(e, -1) {
			set[n] = true
		}
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
