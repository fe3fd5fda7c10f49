package operator

import (
	"context"
	"fmt"
	"slices"

	"switchboard/internal/admin"
	"switchboard/internal/config"
)

// What /admin shows of tags and alerts: the tag keys to sum cost by, and
// the latest alerts the audit log recorded.

// overviewAlerts are the latest alerts of the audit log, for /admin.
func (s *Plane) overviewAlerts(ctx context.Context) []admin.AuditEntry {
	if s.Admin == nil {
		return []admin.AuditEntry{}
	}
	rows, err := s.Admin.Recent(ctx, admin.ActionAlert, 20, 2000)
	if err != nil {
		s.Log.Warn("admin overview: cannot read the alerts", "error", fmt.Sprint(err))
		return []admin.AuditEntry{}
	}
	return rows
}

// tagKeys are the tag keys the config names: the metric keys first (the
// /admin page shows the first by default), then the keys of every
// tenant's rules, sorted.
func tagKeys(cfg *config.Config) []string {
	var rest []string
	add := func(r *config.TagRules) {
		if r != nil {
			rest = append(append(rest, r.Required...), r.Allowed...)
		}
	}
	add(cfg.Tags.Default)
	for _, r := range cfg.Tags.Tenants {
		add(r)
	}
	slices.Sort(rest)
	keys := slices.Clone(cfg.Tags.MetricKeys)
	for _, k := range slices.Compact(rest) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}
