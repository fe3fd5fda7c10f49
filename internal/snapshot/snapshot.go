// Package snapshot is one config version compiled for the request path:
// the config, its route table and what is derived from them once per
// version (token digests, the advisory header names, the provider keys to
// mask, whether any token bucket needs usage, the tag rules). The server
// builds one per applied config and swaps it atomically; every plane is
// handed the one a request started with and reads it without a lock. It
// calls only the packages whose values it holds.
package snapshot

import (
	"crypto/sha256"
	"time"

	"switchboard/internal/admit"
	"switchboard/internal/config"
	"switchboard/internal/redact"
	"switchboard/internal/route"
	"switchboard/internal/tags"
)

// Snapshot is everything a request reads from one config version.
type Snapshot struct {
	Config *config.Config
	Routes *route.Table
	// MetricsHash is sha256(auth.metrics_token) when set; AdminHash
	// sha256(auth.admin_token).
	MetricsHash, AdminHash *[32]byte
	// Advisory: the rate-limit advisory headers are on, under
	// AdvisoryNames (limits.advisory_prefix).
	Advisory      bool
	AdvisoryNames admit.AdvisoryNames
	// Loaded is when this config was applied (the models' created time).
	Loaded time.Time
	// AnyTPM: a global or provider token bucket is configured, so answers
	// must report usage to correct it.
	AnyTPM bool
	// Secrets are the providers' API keys, masked in whatever an upstream
	// answer passes through to a client (nil: none configured).
	Secrets *redact.Secrets
	// Tags are the tags: section's per-tenant rules, compiled.
	Tags *tags.Policy
}

// New compiles cfg, whose routes are table, applied at now.
func New(cfg *config.Config, table *route.Table, now time.Time) *Snapshot {
	snap := &Snapshot{Config: cfg, Routes: table, Advisory: admit.AdvisoryEnabled(cfg), AdvisoryNames: admit.NamesFor(cfg.Limits.AdvisoryPrefix), Loaded: now,
		AnyTPM: cfg.Limits.TPM != nil, Tags: tags.Compile(&cfg.Tags)}
	var keys []string
	for _, p := range cfg.Providers {
		snap.AnyTPM = snap.AnyTPM || p.TPM != nil
		keys = append(keys, p.Keys()...)
	}
	snap.Secrets = redact.New(keys)
	if cfg.Auth.MetricsToken != "" {
		h := sha256.Sum256([]byte(cfg.Auth.MetricsToken))
		snap.MetricsHash = &h
	}
	if cfg.Auth.AdminToken != "" {
		h := sha256.Sum256([]byte(cfg.Auth.AdminToken))
		snap.AdminHash = &h
	}
	return snap
}
