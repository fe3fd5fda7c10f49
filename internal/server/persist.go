package server

import (
	"time"

	"switchboard/internal/health"
	"switchboard/internal/route"
	"switchboard/internal/state"
)

// SaveState persists provider state to dir.
func (s *Server) SaveState(dir string) error {
	snap := s.snap.Load()
	if snap == nil {
		return nil
	}
	stats := s.Stats.Export()
	f := &state.File{Version: state.Version, SavedAt: s.Clock.Now().UTC(), Models: map[string]state.Model{}}
	for _, rt := range snap.Routes.Routes() {
		name := rt.Model.Name
		st := stats[name]
		m := state.Model{ActiveProvider: st.Active, Samples: st.Samples, RequestCount: st.RequestCount,
			Circuits: map[string]state.Circuit{}, QuotaPauses: map[string]state.Pause{}}
		for _, c := range rt.Candidates {
			h := s.Health.Status(c.Provider)
			m.Circuits[c.Provider] = state.Circuit{Open: h.CircuitOpen, OpenedAt: h.OpenedAt}
			if !h.PausedUntil.IsZero() {
				m.QuotaPauses[c.Provider] = state.Pause{Until: h.PausedUntil, Reason: h.PauseReason}
			}
		}
		f.Models[name] = m
	}
	return state.Save(dir, f)
}

// LoadState restores provider state from dir; a missing file is not an
// error, a corrupt or foreign one is returned for the caller to log.
func (s *Server) LoadState(dir string) error {
	f, err := state.Load(dir)
	if err != nil || f == nil {
		return err
	}
	now := s.Clock.Now()
	restored := map[string]bool{}
	for name, m := range f.Models {
		s.Stats.Import(map[string]route.Snapshot{name: {Active: m.ActiveProvider, Samples: m.Samples, RequestCount: m.RequestCount}})
		for p, c := range m.Circuits {
			if restored[p] {
				continue
			}
			restored[p] = true
			st := health.Status{CircuitOpen: c.Open, OpenedAt: c.OpenedAt}
			if q, ok := m.QuotaPauses[p]; ok && q.Until.After(now) {
				st.PausedUntil, st.PauseReason = q.Until, q.Reason
			}
			s.Health.Restore(p, st)
		}
	}
	return nil
}

// SaveEvery persists state every interval until stop is closed.
func (s *Server) SaveEvery(dir string, interval time.Duration, stop <-chan struct{}) {
	for {
		c, cancel := s.Clock.After(interval)
		select {
		case <-stop:
			cancel()
			return
		case <-c:
			if err := s.SaveState(dir); err != nil {
				s.Log.Warn("cannot save provider state", "dir", dir, "error", err.Error())
			}
		}
	}
}

// ActiveProviders maps each model to its active provider.
func (s *Server) ActiveProviders() map[string]string {
	out := map[string]string{}
	if snap := s.snap.Load(); snap != nil {
		for _, rt := range snap.Routes.Routes() {
			out[rt.Model.Name] = route.Measured{Stats: s.Stats}.Active(rt)
		}
	}
	return out
}
