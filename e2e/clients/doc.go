// Package clients is the client matrix: real clients (Claude Code, Gemini
// CLI and Codex CLI at pinned npm versions, and the official OpenAI,
// Anthropic and Google Gen AI Go SDKs) driven against the gateway binary
// built from this tree, which runs as a subprocess in front of fake vendor
// APIs (e2e/upstream). Each cell of the matrix (client, provider type,
// case) is a subtest; at the end the suite prints every cell with its
// result and, for a failure, the reason.
//
// The tests are behind the build tag "clients", so `go test ./...` skips
// them:
//
//	go test -tags clients -race -count=1 ./e2e/clients/
//
// The agents are installed with `npm ci` from this directory's
// package-lock.json into a cache outside the repository
// ($SWITCHBOARD_CLIENTS_DIR, else $XDG_CACHE_HOME/switchboard-clients, else
// ~/.cache/switchboard-clients), once per lock file.
//
// Flags (after -args) and variables: -matrix FILE (SWITCHBOARD_MATRIX)
// writes the matrix as Markdown; -dump DIR (SWITCHBOARD_CLIENTS_DUMP)
// keeps every request each client sent the gateway and each upstream
// received; SWITCHBOARD_GATEWAY_BIN runs a prebuilt gateway binary instead
// of building this tree's; SWITCHBOARD_AGENT_DEADLINE (a Go duration,
// default 120s) bounds one agent run.
package clients
