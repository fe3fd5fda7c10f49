package translate

import "testing"

// Each vocabulary names the same statuses as the tables it replaced.
func TestErrorTypes(t *testing.T) {
	gateway := ErrorTypes{Server: "server_error"}
	tests := []struct {
		status                    int
		openai, anthropic, gatewy string
	}{
		{400, "invalid_request_error", "invalid_request_error", "invalid_request_error"},
		{401, "authentication_error", "authentication_error", "authentication_error"},
		{403, "permission_error", "permission_error", "permission_error"},
		{404, "not_found_error", "not_found_error", "not_found_error"},
		{413, "invalid_request_error", "request_too_large", "invalid_request_error"},
		{422, "invalid_request_error", "invalid_request_error", "invalid_request_error"},
		{429, "rate_limit_error", "rate_limit_error", "rate_limit_error"},
		{500, "server_error", "api_error", "server_error"},
		{502, "server_error", "api_error", "server_error"},
		{503, "overloaded_error", "overloaded_error", "server_error"},
		{529, "overloaded_error", "overloaded_error", "server_error"},
	}
	for _, tt := range tests {
		for _, c := range []struct {
			v    ErrorTypes
			want string
		}{{OpenAIErrors, tt.openai}, {AnthropicErrors, tt.anthropic}, {gateway, tt.gatewy}} {
			if got := c.v.For(tt.status); got != c.want {
				t.Errorf("%+v.For(%d) = %q, want %q", c.v, tt.status, got, c.want)
			}
		}
	}
}
