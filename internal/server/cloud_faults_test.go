package server

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/tidwall/gjson"

	"switchboard/internal/clock"
	"switchboard/internal/provider/cloud/cloudtest"
)

const hiBody = `{"model":"m","max_tokens":32,"messages":[{"role":"user","content":"hi"}]}`

// attemptLines are the "attempt failed" log lines of provider p.
func attemptLines(g *gateway, p string) []string {
	var out []string
	for _, l := range strings.Split(g.logs.String(), "\n") {
		if strings.Contains(l, `msg="attempt failed"`) && strings.Contains(l, "provider="+p+" ") {
			out = append(out, l)
		}
	}
	return out
}

// A credential the cloud refuses is a 401/403: not retried on the same
// provider, logged once per attempt with the cloud's reason and without
// the secret, counted toward the circuit (open after 3), and the request
// falls back to the next provider.
func TestCloudBadCredentialFallsBack(t *testing.T) {
	google := cloudtest.NewGoogle(t)
	tests := []struct {
		name, provider, secret, reason string
		status                         int
		setup                          func(t *testing.T) (*cloudFake, string)
	}{
		{"azure key", "az", "az-revoked-key", "Access denied due to invalid subscription key", 401, func(t *testing.T) (*cloudFake, string) {
			f := newAzure(t, "az-good-key")
			return f, `az: {type: azure, base_url: "` + f.URL + `", api_version: 2024-10-21, api_key: az-revoked-key}`
		}},
		{"bedrock signature", "br", "wrong-aws-secret", "The security token included in the request is invalid", 403, func(t *testing.T) (*cloudFake, string) {
			cloudtest.AWSEnv(t, aws.Credentials{AccessKeyID: "AKIASERVERTEST", SecretAccessKey: "wrong-aws-secret"})
			f := newBedrock(t, func() []aws.Credentials { return []aws.Credentials{bedrockCreds} }, "")
			return f, `br: {type: bedrock, region: us-east-1, base_url: "` + f.URL + `"}`
		}},
		{"vertex permission", "vx", "", "Permission 'aiplatform.endpoints.predict' denied", 403, func(t *testing.T) (*cloudFake, string) {
			f := newVertex(t, google)
			f.fail = func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = w.Write([]byte(`{"error":{"code":403,"message":"Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/projects/test-project/locations/us-east5/publishers/google/models/gemini-2.5-flash' (or it may not exist).","status":"PERMISSION_DENIED"}}`))
			}
			sa := google.ServiceAccountFile(t, t.TempDir())
			return f, `vx: {type: vertex, project: test-project, location: us-east5, base_url: "` + f.URL + `", credentials_file: "` + sa + `"}`
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, prov := tt.setup(t)
			model := map[string]string{"az": "gpt4o", "br": "amazon.nova-pro-v1:0", "vx": "gemini-2.5-flash"}[tt.provider]
			g := startGateway(t, `
providers:
  `+prov+`
  backup: {type: mock, mock: {tokens: 3}}
models:
  - {name: m, probing_enabled: false, providers: [{provider: `+tt.provider+`, model: "`+model+`"}, {provider: backup}]}
retries: {max_attempts: 3, max_rounds: 1, backoff_base: 0.01, max_backoff: 0.05}
`)
			for i := 1; i <= 3; i++ {
				a := g.post("/v1/chat/completions", hiBody)
				if a.Status != 200 || g.mock("backup").Calls() != int64(i) {
					t.Fatalf("request %d: %d %s", i, a.Status, a.Body)
				}
				if n := int(f.n.Load()); n != i {
					t.Fatalf("request %d: the cloud was asked %d times (retried on the same provider?)", i, n)
				}
			}
			lines := attemptLines(g, tt.provider)
			if len(lines) != 3 {
				t.Fatalf("%d attempt lines for 3 refused attempts:\n%s", len(lines), strings.Join(lines, "\n"))
			}
			for _, l := range lines {
				if !strings.Contains(l, tt.reason) || !strings.Contains(l, "status="+strconv.Itoa(tt.status)) {
					t.Fatalf("log line lacks the cloud's reason or status: %s", l)
				}
			}
			if tt.secret != "" && strings.Contains(g.logs.String(), tt.secret) {
				t.Fatal("the secret reached the log")
			}
			// Three refusals opened the circuit: the next request does not
			// ask the cloud.
			if a := g.post("/v1/chat/completions", hiBody); a.Status != 200 || f.n.Load() != 3 {
				t.Fatalf("after the circuit opened: %d, cloud asked %d times", a.Status, f.n.Load())
			}
		})
	}
}

// Bedrock's throttling pauses the provider and falls back, as a 429: the
// next request goes straight to the other provider.
func TestCloudBedrockThrottlingFallsBack(t *testing.T) {
	cloudtest.AWSEnv(t, bedrockCreds)
	for _, typ := range []string{"ThrottlingException", "ServiceQuotaExceededException"} {
		t.Run(typ, func(t *testing.T) {
			f := newBedrock(t, func() []aws.Credentials { return []aws.Credentials{bedrockCreds} }, "")
			status := map[string]int{"ThrottlingException": 429, "ServiceQuotaExceededException": 400}[typ]
			f.fail = func(w http.ResponseWriter) {
				w.Header().Set("X-Amzn-ErrorType", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
				w.WriteHeader(status)
				_, _ = w.Write([]byte(`{"message":"Too many requests, please wait before trying again."}`))
			}
			g := startGateway(t, `
providers:
  br: {type: bedrock, region: us-east-1, base_url: "`+f.URL+`"}
  backup: {type: mock, mock: {tokens: 3}}
models:
  - {name: m, probing_enabled: false, providers: [{provider: br, model: "amazon.nova-pro-v1:0"}, {provider: backup}]}
retries: {max_attempts: 3, max_rounds: 1, backoff_base: 0.01, max_backoff: 0.05}
`)
			if a := g.post("/v1/chat/completions", hiBody); a.Status != 200 || f.n.Load() != 1 {
				t.Fatalf("%d %s; bedrock asked %d times", a.Status, a.Body, f.n.Load())
			}
			if a := g.post("/v1/chat/completions", hiBody); a.Status != 200 || f.n.Load() != 1 {
				t.Fatalf("the paused provider was asked again: %d times", f.n.Load())
			}
			d := g.get("/v1/health/detail")
			if p := gjson.Get(d.Body, "providers.m.providers.br"); !p.Get("quota_paused").Bool() || p.Get("quota_pause_reason").String() != "rate_limited" {
				t.Fatalf("health: %s", p.Raw)
			}
		})
	}
}

// A credential source that cannot produce a token within timeouts.open
// fails the attempt (the request falls back) instead of hanging.
func TestCloudCredentialSourceTimeout(t *testing.T) {
	google := cloudtest.NewGoogle(t)
	google.Hang.Store(true)
	f := newVertex(t, google)
	sa := google.ServiceAccountFile(t, t.TempDir())
	g := startGateway(t, `
providers:
  vx: {type: vertex, project: test-project, location: us-east5, base_url: "`+f.URL+`", credentials_file: "`+sa+`"}
  backup: {type: mock, mock: {tokens: 3}}
models:
  - {name: m, probing_enabled: false, providers: [{provider: vx, model: gemini-2.5-flash}, {provider: backup}]}
  - {name: only, providers: [{provider: vx, model: gemini-2.5-flash}]}
timeouts: {open: 1}
retries: {max_attempts: 1, max_rounds: 1}
`)
	start := time.Now()
	if a := g.post("/v1/chat/completions", hiBody); a.Status != 200 || time.Since(start) > 5*time.Second {
		t.Fatalf("after %v: %d %s", time.Since(start), a.Status, a.Body)
	}
	if l := attemptLines(g, "vx"); len(l) != 1 || !strings.Contains(l[0], "reason=timeout") || !strings.Contains(l[0], "timeouts.open") {
		t.Fatalf("attempt lines %q", l)
	}
	start = time.Now()
	a := g.post("/v1/chat/completions", strings.Replace(hiBody, `"m"`, `"only"`, 1))
	if a.Status < 500 || time.Since(start) > 5*time.Second {
		t.Fatalf("single provider, after %v: %d %s", time.Since(start), a.Status, a.Body)
	}
	if f.n.Load() != 0 {
		t.Fatal("a request without a token reached Vertex AI")
	}
}

// A gateway whose cloud credentials cannot be read or set up still starts
// and serves its other providers; the broken ones answer 401 naming why.
func TestCloudBadCredentialStillStarts(t *testing.T) {
	cloudtest.AWSEnv(t, bedrockCreds)
	az := newAzure(t, "az-key")
	missing := filepath.Join(t.TempDir(), "missing-sa.json")
	g := startGateway(t, `
providers:
  vx: {type: vertex, project: test-project, location: us-east5, base_url: "http://127.0.0.1:9", credentials_file: "`+missing+`"}
  br: {type: bedrock, region: us-east-1, base_url: "http://127.0.0.1:9", profile: no-such-profile}
  az: {type: azure, base_url: "`+az.URL+`", api_version: 2024-10-21, api_key: az-key}
  local: {type: mock, mock: {tokens: 3}}
models:
  - {name: vx, providers: [{provider: vx, model: gemini-2.5-flash}]}
  - {name: br, providers: [{provider: br, model: "amazon.nova-pro-v1:0"}]}
  - {name: az, providers: [{provider: az, model: gpt4o}]}
  - {name: local, providers: [{provider: local}]}
retries: {max_attempts: 2, max_rounds: 1, backoff_base: 0.01, max_backoff: 0.05}
`)
	for _, m := range []string{"local", "az"} {
		if a := g.post("/v1/chat/completions", strings.Replace(hiBody, `"m"`, `"`+m+`"`, 1)); a.Status != 200 {
			t.Fatalf("%s: %d %s", m, a.Status, a.Body)
		}
	}
	for m, why := range map[string]string{"vx": "missing-sa.json", "br": "no-such-profile"} {
		a := g.post("/v1/chat/completions", strings.Replace(hiBody, `"m"`, `"`+m+`"`, 1))
		if a.Status != 401 || gjson.Get(a.Body, "error.code").String() != "upstream_credentials" || !strings.Contains(a.Body, why) {
			t.Fatalf("%s: %d %s", m, a.Status, a.Body)
		}
	}
}

// Bedrock: an api_key wins over AWS credentials in the environment; an
// assumed role's credentials sign, its session token carried.
func TestCloudBedrockCredentials(t *testing.T) {
	cloudtest.AWSEnv(t, bedrockCreds)
	f := newBedrock(t, nil, "bedrock-api-key")
	g := startGateway(t, `
providers:
  br: {type: bedrock, region: us-east-1, base_url: "`+f.URL+`", api_key: bedrock-api-key}
models:
  - {name: m, providers: [{provider: br, model: "amazon.nova-pro-v1:0"}]}
`)
	if a := g.post("/v1/chat/completions", hiBody); a.Status != 200 || f.last(t).auth != "Bearer bedrock-api-key" {
		t.Fatalf("%d %s; Authorization %q", a.Status, a.Body, f.last(t).auth)
	}

	base := aws.Credentials{AccessKeyID: "AKIABASE", SecretAccessKey: "base-secret"}
	cloudtest.AWSEnv(t, base)
	sts := cloudtest.NewSTS(t, base, "arn:aws:iam::123456789012:role/bedrock-caller", "ext-1")
	t.Setenv("AWS_ENDPOINT_URL_STS", sts.URL)
	f = newBedrock(t, sts.Issued, "")
	g = startGateway(t, `
providers:
  br: {type: bedrock, region: us-east-1, base_url: "`+f.URL+`", role_arn: "arn:aws:iam::123456789012:role/bedrock-caller", external_id: ext-1}
models:
  - {name: m, providers: [{provider: br, model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}]}
`)
	for range 2 {
		if a := g.post("/v1/chat/completions", hiBody); a.Status != 200 {
			t.Fatalf("%d %s (%q)", a.Status, a.Body, f.problems())
		}
	}
	if p := f.problems(); len(p) > 0 || len(sts.Issued()) != 1 {
		t.Fatalf("problems %q, role assumed %d times", p, len(sts.Issued()))
	}
}

// Vertex AI through the server: a token that expires mid-run is replaced
// before it expires (from its expires_in, on the gateway's clock).
func TestCloudVertexTokenRefresh(t *testing.T) {
	google := cloudtest.NewGoogle(t)
	f := newVertex(t, google)
	sa := google.ServiceAccountFile(t, t.TempDir())
	clk := clock.NewFake(time.Now())
	g := startGatewayClock(t, `
providers:
  vx: {type: vertex, project: test-project, location: us-east5, base_url: "`+f.URL+`", credentials_file: "`+sa+`"}
models:
  - {name: m, providers: [{provider: vx, model: gemini-2.5-flash}]}
`, clk)
	g.post("/v1/chat/completions", hiBody)
	first := f.last(t).auth
	clk.Advance(57 * time.Minute) // 3 of the token's 60 minutes left
	if a := g.post("/v1/chat/completions", hiBody); a.Status != 200 || f.last(t).auth != first {
		t.Fatalf("%d; the request in the margin did not use the current token", a.Status)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.last(t).auth == first && time.Now().Before(deadline) {
		g.post("/v1/chat/completions", hiBody)
	}
	if f.last(t).auth == first || google.Issued() != 2 {
		t.Fatalf("not refreshed before expiry: %d tokens issued", google.Issued())
	}
}

// Azure's content filter refusal is a content_policy failure: the model's
// content_policy fallback serves the request.
func TestCloudAzureContentFilterFallback(t *testing.T) {
	az := newAzure(t, "az-key")
	az.fail = func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":true,"severity":"high"}}}}}`))
	}
	g := startGateway(t, `
providers:
  az: {type: azure, base_url: "`+az.URL+`", api_version: 2024-10-21, api_key: az-key}
  other: {type: mock, mock: {tokens: 3}}
models:
  - {name: m, providers: [{provider: az, model: gpt4o}], fallbacks: {models: [safe], on: [content_policy]}}
  - {name: safe, providers: [{provider: other}]}
`)
	if a := g.post("/v1/chat/completions", hiBody); a.Status != 200 || g.mock("other").Calls() != 1 || az.n.Load() != 1 {
		t.Fatalf("%d %s", a.Status, a.Body)
	}
}
