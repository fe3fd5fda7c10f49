package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"switchboard/internal/config"
)

// k8sObject is the part of a manifest the test reads; fields left out are
// not checked.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string
	Metadata   struct {
		Name   string
		Labels map[string]string
	}
	Data       map[string]string
	StringData map[string]string `yaml:"stringData"`
	Resources  []string
	Spec       struct {
		Replicas       int
		MaxUnavailable any `yaml:"maxUnavailable"`
		// Selector of a Deployment or PDB (a Service's is a plain map: see
		// svcSelector).
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		}
		Template struct {
			Metadata struct{ Labels map[string]string }
			Spec     podSpec
		}
		Ports []struct {
			Name       string
			Port       int
			TargetPort any `yaml:"targetPort"`
		}
	}
}

type podSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
		RunAsUser    int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []struct {
		Name  string
		Image string
		Ports []struct {
			Name          string
			ContainerPort int `yaml:"containerPort"`
		}
		Env []struct {
			Name      string
			Value     string
			ValueFrom *struct {
				SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		}
		ReadinessProbe *probe `yaml:"readinessProbe"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		Lifecycle      struct {
			PreStop struct {
				Sleep *struct{ Seconds int }
			} `yaml:"preStop"`
		}
		SecurityContext struct {
			ReadOnlyRootFilesystem bool `yaml:"readOnlyRootFilesystem"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	Volumes []struct {
		Name      string
		ConfigMap *struct{ Name string } `yaml:"configMap"`
		Secret    *struct {
			SecretName string `yaml:"secretName"`
		}
		EmptyDir any `yaml:"emptyDir"`
	}
}

type probe struct {
	HTTPGet struct {
		Path string
		Port any
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

func readManifests(t *testing.T) (files []string, objs map[string]k8sObject) {
	t.Helper()
	dir := filepath.Join(root, "deploy/kubernetes")
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	objs = map[string]k8sObject{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.Base(p))
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var o k8sObject
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", filepath.Base(p), err)
			}
			if o.Kind == "" || o.APIVersion == "" {
				t.Fatalf("%s: a document without kind or apiVersion", filepath.Base(p))
			}
			if _, dup := objs[o.Kind]; dup {
				t.Fatalf("%s: a second %s", filepath.Base(p), o.Kind)
			}
			objs[o.Kind] = o
		}
	}
	sort.Strings(files)
	return files, objs
}

// The manifests hang together: what the Deployment mounts, reads and
// probes exists, the Service and PDB select its pods, the ConfigMap's
// config passes the gateway's own validation with the Secret's values,
// and the grace period covers the preStop sleep, shutdown_delay and the
// drain bound.
func TestKubernetesManifests(t *testing.T) {
	files, objs := readManifests(t)
	for _, kind := range []string{"Kustomization", "ConfigMap", "Secret", "Deployment", "Service", "PodDisruptionBudget"} {
		if _, ok := objs[kind]; !ok {
			t.Fatalf("no %s in deploy/kubernetes", kind)
		}
	}
	kust := objs["Kustomization"]
	res := append([]string{"kustomization.yaml"}, kust.Resources...)
	sort.Strings(res)
	if strings.Join(res, " ") != strings.Join(files, " ") {
		t.Errorf("kustomization.yaml lists %v; the directory has %v", kust.Resources, files)
	}

	dep := objs["Deployment"]
	pod := dep.Spec.Template.Spec
	podLabels := dep.Spec.Template.Metadata.Labels
	matches := func(sel map[string]string) bool {
		for k, v := range sel {
			if podLabels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !matches(dep.Spec.Selector.MatchLabels) {
		t.Errorf("the Deployment's selector %v does not match its pods %v", dep.Spec.Selector.MatchLabels, podLabels)
	}
	if dep.Spec.Replicas < 2 {
		t.Errorf("replicas %d: a fleet needs at least 2", dep.Spec.Replicas)
	}
	if !pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser != 1000 {
		t.Errorf("pod securityContext: want runAsNonRoot and UID 1000 (the image's user), got %+v", pod.SecurityContext)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 4567 || c.Ports[0].Name == "" {
		t.Fatalf("container ports %+v: want one named port 4567", c.Ports)
	}
	portName := c.Ports[0].Name
	probeOK := func(p *probe, path string) bool {
		return p != nil && p.HTTPGet.Path == path && (p.HTTPGet.Port == portName || p.HTTPGet.Port == 4567)
	}
	if !probeOK(c.ReadinessProbe, "/ready") {
		t.Errorf("readiness probe %+v: want GET /ready on the gateway's port", c.ReadinessProbe)
	}
	if !probeOK(c.LivenessProbe, "/health") {
		t.Errorf("liveness probe %+v: want GET /health on the gateway's port", c.LivenessProbe)
	}
	if !c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the container should run with a read-only root filesystem (state lives in /data)")
	}

	// Volumes: every mount is declared, each source exists here.
	vols := map[string]bool{}
	mounts := map[string]string{}
	for _, v := range pod.Volumes {
		vols[v.Name] = true
		switch {
		case v.ConfigMap != nil && v.ConfigMap.Name != objs["ConfigMap"].Metadata.Name:
			t.Errorf("volume %s mounts ConfigMap %s, not defined here", v.Name, v.ConfigMap.Name)
		case v.Secret != nil && v.Secret.SecretName != objs["Secret"].Metadata.Name:
			t.Errorf("volume %s mounts Secret %s, not defined here", v.Name, v.Secret.SecretName)
		}
	}
	for _, m := range c.VolumeMounts {
		if !vols[m.Name] {
			t.Errorf("volumeMount %s has no volume", m.Name)
		}
		mounts[m.Name] = m.MountPath
	}

	// Env: secret references resolve; CONFIG_FILE and STATE_DIR point
	// into mounts.
	env := map[string]string{}
	secret := objs["Secret"]
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := secret.StringData[ref.Key]
			if ref.Name != secret.Metadata.Name || !ok {
				t.Errorf("env %s: secret %s key %s is not defined here", e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = v
		default:
			env[e.Name] = e.Value
		}
	}
	if env["SWITCHBOARD_REDIS_URL"] == "" || !strings.HasPrefix(env["SWITCHBOARD_REDIS_URL"], "redis") {
		t.Errorf("SWITCHBOARD_REDIS_URL (the fleet's Redis) = %q", env["SWITCHBOARD_REDIS_URL"])
	}
	if env["STATE_DIR"] != mounts["data"] {
		t.Errorf("STATE_DIR %q is not the data mount %q", env["STATE_DIR"], mounts["data"])
	}
	cfgFile := env["CONFIG_FILE"]
	cm := objs["ConfigMap"]
	cfgText, ok := cm.Data[filepath.Base(cfgFile)]
	if !ok || filepath.Dir(cfgFile) != mounts["config"] {
		t.Fatalf("CONFIG_FILE %q is not a key of the ConfigMap mounted at %q", cfgFile, mounts["config"])
	}

	// The config validates as the gateway would load it in the pod: the
	// Deployment's env set, the Secret's keys.json where it is mounted.
	for _, ref := range regexp.MustCompile(`\$\{([A-Z0-9_]+)`).FindAllStringSubmatch(cfgText, -1) {
		if _, ok := env[ref[1]]; !ok {
			t.Errorf("the config reads ${%s}, which the Deployment does not set", ref[1])
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	tmp := t.TempDir()
	if err := os.WriteFile(filepath.Join(tmp, "keys.json"), []byte(secret.StringData["keys.json"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgText = strings.ReplaceAll(cfgText, mounts["keys"]+"/", tmp+"/")
	cfg, err := config.Parse([]byte(cfgText), "configmap.yaml")
	if err != nil {
		t.Fatalf("the ConfigMap's config does not validate:\n%v", err)
	}
	if !cfg.Auth.Enabled() {
		t.Error("SWITCHBOARD_ENV=production needs auth in the config")
	}

	// Termination: preStop sleep, then SIGTERM, then shutdown_delay with
	// /ready 503, then the drain of timeouts.shutdown, all inside the
	// grace period.
	if c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds <= 0 {
		t.Fatal("no preStop sleep: endpoints would still route to a terminating pod")
	}
	var raw struct {
		Timeouts map[string]any
	}
	yaml.Unmarshal([]byte(cfgText), &raw)
	delay := seconds(t, raw.Timeouts["shutdown_delay"], 0)
	// Kubernetes defaults: period 10 s, failure threshold 3.
	period, fails := c.ReadinessProbe.PeriodSeconds, c.ReadinessProbe.FailureThreshold
	if period == 0 {
		period = 10
	}
	if fails == 0 {
		fails = 3
	}
	if delay <= period*fails {
		t.Errorf("timeouts.shutdown_delay %d s: want it above the readiness probe's %d s x %d, so the pod is seen not ready before it stops serving", delay, period, fails)
	}
	need := c.Lifecycle.PreStop.Sleep.Seconds + delay + seconds(t, raw.Timeouts["shutdown"], 30)
	if pod.TerminationGracePeriodSeconds < need {
		t.Errorf("terminationGracePeriodSeconds %d < preStop + shutdown_delay + shutdown = %d", pod.TerminationGracePeriodSeconds, need)
	}

	// Service and PDB select the pods; the Service targets the named port.
	svc := objs["Service"]
	if !matches(svcSelector(t)) {
		t.Errorf("the Service does not select the Deployment's pods")
	}
	if len(svc.Spec.Ports) != 1 || (svc.Spec.Ports[0].TargetPort != portName && svc.Spec.Ports[0].TargetPort != 4567) {
		t.Errorf("service ports %+v: want the gateway's port", svc.Spec.Ports)
	}
	pdb := objs["PodDisruptionBudget"]
	if !matches(pdb.Spec.Selector.MatchLabels) {
		t.Errorf("the PDB does not select the Deployment's pods")
	}
	if n, ok := pdb.Spec.MaxUnavailable.(int); !ok || n < 1 || n >= dep.Spec.Replicas {
		t.Errorf("PDB maxUnavailable %v: want 1..replicas-1", pdb.Spec.MaxUnavailable)
	}
}

// svcSelector reads service.yaml's spec.selector (a plain label map,
// unlike the matchLabels of a Deployment or PDB).
func svcSelector(t *testing.T) map[string]string {
	var s struct {
		Spec struct{ Selector map[string]string }
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy/kubernetes/service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s.Spec.Selector
}

// seconds reads a config duration the way the config does (a number of
// seconds or a Go duration string), def when absent.
func seconds(t *testing.T, v any, def int) int {
	t.Helper()
	switch x := v.(type) {
	case nil:
		return def
	case int:
		return x
	case float64:
		return int(x + 0.999)
	case string:
		var d config.Duration
		if err := yaml.Unmarshal([]byte(x), &d); err != nil {
			t.Fatalf("duration %q: %v", x, err)
		}
		return int(d.D().Seconds() + 0.999)
	}
	t.Fatalf("duration %v of type %T", v, v)
	return 0
}
