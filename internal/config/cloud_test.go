package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const cloudModels = `
models:
  - name: m
    providers: [{provider: p, model: x}]
`

func TestCloudProvidersLoad(t *testing.T) {
	tests := []struct {
		name, yaml string
		check      func(p *Provider) string
	}{
		{"azure key", `
providers:
  p: {type: azure, base_url: "https://res.openai.azure.com", api_version: 2024-10-21, api_key: k}`,
			func(p *Provider) string { return p.APIVersion + " " + p.Keys()[0] }},
		{"azure entra workload identity from the environment", `
providers:
  p: {type: azure, base_url: "https://res.openai.azure.com", api_version: v1, entra: {method: workload_identity}}`,
			func(p *Provider) string { return p.APIVersion + " " + p.Entra.Method }},
		{"bedrock base_url from region", `
providers:
  p: {type: bedrock, region: eu-central-1}`,
			func(p *Provider) string { return p.BaseURL }},
		{"bedrock china region", `
providers:
  p: {type: bedrock, region: cn-north-1, role_arn: "arn:aws-cn:iam::123456789012:role/r", external_id: x}`,
			func(p *Provider) string { return p.BaseURL + " " + p.RoleARN }},
		{"bedrock base_url override", `
providers:
  p: {type: bedrock, region: us-east-1, base_url: "https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com", api_key: k}`,
			func(p *Provider) string { return p.BaseURL }},
		{"vertex regional", `
providers:
  p: {type: vertex, project: my-project-1, location: us-east5}`,
			func(p *Provider) string { return p.BaseURL }},
		{"vertex global", `
providers:
  p: {type: vertex, project: my-project-1, location: global}`,
			func(p *Provider) string { return p.BaseURL }},
	}
	want := []string{
		"2024-10-21 k",
		"v1 workload_identity",
		"https://bedrock-runtime.eu-central-1.amazonaws.com",
		"https://bedrock-runtime.cn-north-1.amazonaws.com.cn arn:aws-cn:iam::123456789012:role/r",
		"https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com",
		"https://us-east5-aiplatform.googleapis.com",
		"https://aiplatform.googleapis.com",
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse([]byte(tt.yaml+cloudModels), "t.yaml", noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.check(c.Providers["p"]); got != want[i] {
				t.Fatalf("got %q, want %q", got, want[i])
			}
		})
	}
}

// Each missing or misplaced cloud field is named with what it is.
func TestCloudProviderErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // "field: message part", in file order
	}{
		{"azure without version or key", `
providers:
  p: {type: azure, base_url: "https://res.openai.azure.com"}`,
			[]string{"providers.p.api_key: required for type azure", "providers.p.api_version: required for type azure"}},
		{"azure path pasted into base_url, bad version", `
providers:
  p: {type: azure, base_url: "https://res.openai.azure.com/openai/deployments/gpt", api_version: "2024", api_key: k}`,
			[]string{"providers.p.api_version: want v1 or a date version", "providers.p.base_url: is the resource endpoint"}},
		{"azure key and entra", `
providers:
  p: {type: azure, base_url: "https://r.openai.azure.com", api_version: v1, api_key: k, entra: {method: managed_identity}}`,
			[]string{"providers.p.entra: set api_key or entra, not both"}},
		{"entra client secret incomplete", `
providers:
  p:
    type: azure
    base_url: "https://r.openai.azure.com"
    api_version: v1
    entra: {method: client_secret, client_id: c, token_file: /f, authority_host: "http://x"}`,
			[]string{"providers.p.entra.authority_host: want an https:// URL", "providers.p.entra.client_secret: required for method client_secret",
				"providers.p.entra.tenant_id: required for method client_secret", "providers.p.entra.token_file: not used by method client_secret"}},
		{"entra without method", `
providers:
  p: {type: azure, base_url: "https://r.openai.azure.com", api_version: v1, entra: {client_id: c}}`,
			[]string{"providers.p.entra.method: required: one of client_secret, workload_identity, managed_identity"}},
		{"bedrock without region", `
providers:
  p: {type: bedrock}`,
			[]string{"providers.p.region: required for type bedrock"}},
		{"bedrock bad region, role, external id alone", `
providers:
  p: {type: bedrock, region: "US East", role_arn: "role/x"}
  q: {type: bedrock, region: us-west-2, external_id: e, api_key: k, profile: dev}`,
			[]string{"providers.p.region: want an AWS region", "providers.p.role_arn: want an IAM role ARN",
				"providers.q.api_key: a Bedrock API key is sent as it is", "providers.q.external_id: only used with role_arn"}},
		{"vertex without project and location, with a key", `
providers:
  p: {type: vertex, api_key: k}`,
			[]string{"providers.p.api_key: type vertex authenticates with credentials_file", "providers.p.location: required for type vertex",
				"providers.p.project: required for type vertex"}},
		{"cloud fields on the wrong type", `
providers:
  p: {type: openai, base_url: "https://x", api_version: v1, region: us-east-1, project: my-project, credentials_file: /x}`,
			[]string{"providers.p.api_version: only for type azure", "providers.p.credentials_file: only for type vertex",
				"providers.p.project: only for type vertex", "providers.p.region: only for type bedrock"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]byte(tt.yaml+cloudModels), "t.yaml", noEnv)
			var es *Errors
			if !errors.As(err, &es) {
				t.Fatalf("err %v, want *Errors", err)
			}
			var got []string
			for _, e := range *es {
				got = append(got, e.Field+": "+e.Msg)
			}
			// Same line: order by field for a stable comparison.
			slices.Sort(got)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("error %d = %q, want prefix %q", i, got[i], w)
				}
			}
		})
	}
}

// A credentials file that cannot be read is a warning, not an error: the
// gateway must start and serve its other providers.
func TestVertexMissingCredentialsFileWarns(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "sa.json")
	c, err := parse([]byte(`
providers:
  p: {type: vertex, project: my-project-1, location: us-central1, credentials_file: "`+missing+`"}`+cloudModels), "t.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "t.yaml:3: providers.p.credentials_file: cannot be read") {
		t.Fatalf("warnings %q", c.Warnings)
	}
	if err := os.WriteFile(missing, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = parse([]byte(`
providers:
  p: {type: vertex, project: my-project-1, location: us-central1, credentials_file: "`+missing+`"}`+cloudModels), "t.yaml", noEnv); err != nil || len(c.Warnings) != 0 {
		t.Fatalf("err %v warnings %q", err, c.Warnings)
	}
}
