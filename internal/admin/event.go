package admin

import (
	"context"
	"strings"
)

// ActionAlert prefixes the audit rows of alerts (alert.budget.threshold,
// alert.circuit.open, alert.queue.dlq): events the gateway itself
// recorded, beside the operators' changes. They touch no record.
const ActionAlert = "alert."

// Record appends an audit row that changes no record (an alert sent or
// not delivered). Like every change it bumps the version, so replicas
// re-read, but they find no record to read (see follow.go).
func (s *Service) Record(ctx context.Context, e AuditEntry) error {
	_, err := s.St.Update(ctx, func(*State) (*Change, error) {
		if e.At.IsZero() {
			e.At = s.Clock.Now()
		}
		return &Change{Audit: e}, nil
	})
	return err
}

// Recent returns up to n of the latest audit rows whose action starts
// with prefix, newest first, reading at most the last scan rows.
func (s *Service) Recent(ctx context.Context, prefix string, n, scan int) ([]AuditEntry, error) {
	v, err := s.St.Version(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.St.Audit(ctx, AuditQuery{After: max(v-int64(scan), 0), Limit: scan})
	if err != nil {
		return nil, err
	}
	out := []AuditEntry{}
	for i := len(rows) - 1; i >= 0 && len(out) < n; i-- {
		if strings.HasPrefix(rows[i].Action, prefix) {
			out = append(out, rows[i])
		}
	}
	return out, nil
}
