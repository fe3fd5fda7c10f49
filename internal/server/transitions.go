package server

import (
	"context"
	"log/slog"
	"strings"

	"switchboard/internal/health"
)

// logTransition writes one line per circuit or pause transition: opened
// and paused at warn, the rest at info. It runs under the provider's
// health lock (see health.Registry.OnTransition): it only logs.
func (s *Server) logTransition(t health.Transition) {
	s.obs.alerts.Load().Transition(t) // queues without waiting
	lvl := slog.LevelInfo
	if t.Kind == health.EventCircuitOpen || t.Kind == health.EventPaused {
		lvl = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("event", t.Kind), slog.String("provider", t.Provider),
		slog.Time("at", t.Time.UTC())}
	if t.Reason != "" {
		attrs = append(attrs, slog.String("reason", t.Reason))
	}
	if !t.Until.IsZero() {
		attrs = append(attrs, slog.Time("until", t.Until.UTC()))
	}
	if t.Fleet {
		attrs = append(attrs, slog.Bool("fleet", true))
	}
	s.Log.LogAttrs(context.Background(), lvl, "provider "+strings.ReplaceAll(t.Kind, "_", " "), attrs...)
}
