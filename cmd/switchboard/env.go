package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
)

// The LLM Proxy's Docker image runs with RACK_ENV=production and binds with
// PUMA_BIND; a deployment migrated from it keeps those variables, so they
// mean here what they meant there (docs/migrating.md).

// productionEnv reports whether the environment asks for production mode,
// and the variable that said so: SWITCHBOARD_ENV, else LLM Proxy's RACK_ENV.
func productionEnv(getenv func(string) string) (bool, string) {
	for _, name := range []string{"SWITCHBOARD_ENV", "RACK_ENV"} {
		if v := getenv(name); v != "" {
			return strings.EqualFold(strings.TrimSpace(v), "production"), name
		}
	}
	return false, ""
}

// listenDefault is the listen address when --listen is not given: BIND,
// else PUMA_BIND (tcp://host[:port]), else 0.0.0.0.
func listenDefault(getenv func(string) string) (string, error) {
	if v := getenv("BIND"); v != "" {
		return v, nil
	}
	v := getenv("PUMA_BIND")
	if v == "" {
		return "0.0.0.0", nil
	}
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok {
		return v, nil
	}
	if scheme != "tcp" || rest == "" {
		return "", fmt.Errorf("PUMA_BIND=%q: only tcp://host[:port] is supported (use BIND or --listen)", v)
	}
	// Puma accepts query options (tcp://0.0.0.0:9292?backlog=1024) that have no meaning here.
	rest, _, _ = strings.Cut(rest, "?")
	return rest, nil
}

// ignoredPuma names the PUMA_* variables other than PUMA_BIND: Puma's
// thread and worker pools have no counterpart (each request has its own
// goroutine; limits.max_concurrency bounds them), so they are reported
// once at boot instead of being dropped silently.
func ignoredPuma(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PUMA_") && name != "PUMA_BIND" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func logIgnoredPuma(log *slog.Logger) {
	if names := ignoredPuma(os.Environ()); len(names) > 0 {
		log.Warn("ignoring Puma settings: requests are served concurrently without a thread pool; bound them with limits.max_concurrency",
			"variables", strings.Join(names, ","))
	}
}
