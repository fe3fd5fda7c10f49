//go:build clients

package clients

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The model names the agents send to the gateway.
const (
	claudeModel = "claude-sonnet-4-6"
	codexModel  = "gpt-5.5" // a name Codex knows: it then sends reasoning and asks for encrypted reasoning back
)

// geminiModels are the names Gemini CLI 0.61 may send: its router's
// classifier (flash-lite) and the main turn's pro or flash, plus the
// defaults it names in its code.
var geminiModels = []string{"gemini-3.1-pro-preview", "gemini-3.5-flash-lite", "gemini-3.8-flash",
	"gemini-3-pro-preview", "gemini-3-flash-preview", "gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite"}

// runClaude runs `claude -p` with the JSON result on stdout. Claude Code
// takes the API root without /v1 and posts to /v1/messages?beta=true.
func runClaude(ctx context.Context, e agentEnv) agentRun {
	env := []string{"HOME=" + e.home,
		"ANTHROPIC_BASE_URL=" + e.base, "ANTHROPIC_API_KEY=" + e.key,
		"ANTHROPIC_MODEL=" + claudeModel, "ANTHROPIC_SMALL_FAST_MODEL=" + claudeModel,
		"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + claudeModel, "ANTHROPIC_DEFAULT_SONNET_MODEL=" + claudeModel,
		"ANTHROPIC_DEFAULT_OPUS_MODEL=" + claudeModel,
		// No telemetry, error reports, update checks or other traffic
		// beyond the API itself; two retries so a failing cell ends soon.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_MAX_RETRIES=2"}
	stdout, stderr, err := execAgent(ctx, e, env, "claude", "-p", prompt, "--output-format", "json",
		"--max-turns", "4", "--no-session-persistence")
	var res struct {
		Result, Subtype string
		IsError         bool `json:"is_error"`
		APIErrorStatus  int  `json:"api_error_status"`
	}
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &res); jerr != nil {
		return agentRun{failed: fmt.Sprintf("exit %v, no JSON result: %s %s", err, tail(stdout, 300), tail(stderr, 600))}
	}
	if res.IsError || err != nil {
		return agentRun{answer: res.Result, failed: fmt.Sprintf("exit %v, %s (API status %d): %s", err, res.Subtype, res.APIErrorStatus, res.Result)}
	}
	return agentRun{answer: res.Result}
}

// geminiSettings selects API-key auth (no login) and turns off usage
// statistics, telemetry and update checks.
const geminiSettings = `{"security":{"auth":{"selectedType":"gemini-api-key"}},
"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false},
"general":{"disableAutoUpdate":true,"disableUpdateNag":true}}`

// runGemini runs `gemini -p` with the JSON result on stdout (an error is
// a JSON object on stderr). Gemini CLI takes the API root without /v1beta.
func runGemini(ctx context.Context, e agentEnv) agentRun {
	dir := filepath.Join(e.home, ".gemini")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return agentRun{failed: err.Error()}
	}
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), []byte(geminiSettings), 0o644); err != nil {
		return agentRun{failed: err.Error()}
	}
	env := []string{"HOME=" + e.home, "GOOGLE_GEMINI_BASE_URL=" + e.base, "GEMINI_API_KEY=" + e.key,
		"GEMINI_CLI_TRUST_WORKSPACE=true",
		// One node process instead of a relaunch with a bigger heap: half the start-up.
		"GEMINI_CLI_NO_RELAUNCH=true"}
	stdout, stderr, err := execAgent(ctx, e, env, "gemini", "-p", prompt, "--output-format", "json")
	var res struct {
		Response string
		Error    *struct {
			Type, Message string
			Code          any
		}
	}
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &res); jerr == nil && res.Error == nil && err == nil {
		return agentRun{answer: res.Response}
	}
	// The error object follows warnings on stderr.
	if i := strings.Index(stderr, "\n{"); i >= 0 {
		if json.Unmarshal([]byte(stderr[i+1:]), &res) == nil && res.Error != nil {
			return agentRun{answer: res.Response, failed: fmt.Sprintf("exit %v, %s %v: %s", err, res.Error.Type, res.Error.Code, res.Error.Message)}
		}
	}
	return agentRun{answer: res.Response, failed: fmt.Sprintf("exit %v: %s %s", err, tail(stdout, 300), tail(stderr, 600))}
}

// codexConfig is CODEX_HOME/config.toml: a custom provider on the
// Responses wire API, its key from SB_API_KEY; no update check, analytics
// or plugin sync (which fetches from GitHub); one retry per request and
// stream so that a failing cell ends soon.
const codexConfig = `model = %q
model_provider = "switchboard"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false

[model_providers.switchboard]
name = "Switchboard"
base_url = %q
env_key = "SB_API_KEY"
wire_api = "responses"
request_max_retries = 1
stream_max_retries = 1
`

// runCodex runs `codex exec`, its last message written to a file.
func runCodex(ctx context.Context, e agentEnv) agentRun {
	home := filepath.Join(e.home, ".codex")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return agentRun{failed: err.Error()}
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(fmt.Sprintf(codexConfig, codexModel, e.base+"/v1")), 0o644); err != nil {
		return agentRun{failed: err.Error()}
	}
	last := filepath.Join(e.home, "last-message.txt")
	env := []string{"HOME=" + e.home, "CODEX_HOME=" + home, "SB_API_KEY=" + e.key}
	stdout, stderr, err := execAgent(ctx, e, env, "codex", "exec", "--skip-git-repo-check", "--color", "never",
		"-o", last, prompt)
	answer, _ := os.ReadFile(last)
	if err != nil || len(answer) == 0 {
		var errs []string
		for _, l := range strings.Split(stderr+"\n"+stdout, "\n") {
			if strings.Contains(l, "ERROR") || strings.Contains(l, "error") {
				errs = append(errs, strings.TrimSpace(l))
			}
		}
		why := strings.Join(errs, " | ")
		if why == "" {
			why = tail(stderr, 600)
		}
		return agentRun{answer: string(answer), failed: fmt.Sprintf("exit %v: %s", err, why)}
	}
	return agentRun{answer: string(answer)}
}
