package server

import (
	"context"

	"switchboard/internal/admin"
	"switchboard/internal/tenant"
)

// SetAdminStore chooses where the keys and tenants issued through the
// admin API live, and loads them into the key table. Call it before the
// first Apply; without it Apply keeps them in memory (lost at exit).
func (s *Server) SetAdminStore(ctx context.Context, st admin.Store) error {
	svc := &admin.Service{St: st, Clock: s.Clock, Log: s.Log, Apply: func(is *tenant.Issued) { s.admission().SetIssued(is) }}
	s.op.Admin = svc
	return svc.Refresh(ctx, true)
}

// FollowAdmin keeps the key table in step with a store other replicas
// write (Redis) until ctx ends.
func (s *Server) FollowAdmin(ctx context.Context) {
	if s.op.Admin != nil {
		s.op.Admin.Run(ctx)
	}
}
