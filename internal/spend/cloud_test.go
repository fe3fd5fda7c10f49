package spend

import "testing"

// The clouds' names of a model find its entry: Bedrock ids (cross-region
// prefix, vendor, version, inference profile ARNs), Vertex AI's "@" dates,
// Azure's spelling; names that only look alike do not.
func TestCatalogCloudNames(t *testing.T) {
	tests := []struct{ name, want string }{
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5-20250929"},
		{"anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet-20241022"},
		{"global.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5-20251001"},
		{"arn:aws:bedrock:us-east-1:123456789012:inference-profile/eu.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1-20250805"},
		{"amazon.nova-pro-v1:0", "amazon.nova-pro"},
		{"us.amazon.nova-lite-v1:0", "amazon.nova-lite"},
		{"us.meta.llama3-3-70b-instruct-v1:0", "meta.llama3-3-70b-instruct"},
		{"amazon.titan-embed-text-v2:0", "amazon.titan-embed-text-v2:0"},
		{"claude-sonnet-4-5@20250929", "claude-sonnet-4-5-20250929"},
		{"publishers/anthropic/models/claude-opus-4-1@20250805", "claude-opus-4-1-20250805"},
		{"gemini-2.5-flash", "gemini-2.5-flash"},
		{"gpt-35-turbo", "gpt-3.5-turbo"},
		{"deepseek-v3", ""},           // not a Bedrock id: no version stripped
		{"us.unknown.model-v1:0", ""}, // an unknown vendor
	}
	for _, tt := range tests {
		e, ok := Builtin().search(tt.name)
		switch {
		case tt.want == "" && ok:
			t.Errorf("%s: found %s", tt.name, e.Model)
		case tt.want != "" && (!ok || e.Model != tt.want):
			t.Errorf("%s: found %v %v, want %s", tt.name, e, ok, tt.want)
		}
	}
}
