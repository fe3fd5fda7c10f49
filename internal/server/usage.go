package server

import (
	"switchboard/internal/idempotency"
	"switchboard/internal/usagelog"
)

// SetUsageLog sets the per-request usage log (nil: off).
func (s *Server) SetUsageLog(l *usagelog.Log) { s.usage.Store(l) }

// UsageLog is the usage log (nil when off).
func (s *Server) UsageLog() *usagelog.Log { return s.usage.Load() }

// SetIdempotency sets the store before the first Apply (default: memory).
func (s *Server) SetIdempotency(st idempotency.Store) { s.inf.Idempotency = st }
