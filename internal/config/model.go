package config

import "time"

// Model returns the model named name, or nil. It is a map lookup for a
// Config from Parse/Load and a scan for one built by hand (tests).
func (c *Config) Model(name string) *Model {
	if c.models != nil {
		return c.models[name]
	}
	for _, m := range c.Models {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Primary returns the index of the provider entry marked primary: true, or
// 0 when none is.
func (m *Model) Primary() int {
	for i, p := range m.Providers {
		if p.Primary {
			return i
		}
	}
	return 0
}

// TTFTFor returns the first-token timeout for m: its ttft_timeout when set,
// 0 (off) when that is false, else timeouts.ttft. m may be nil.
func (c *Config) TTFTFor(m *Model) time.Duration {
	if m == nil {
		return c.Timeouts.TTFT.D()
	}
	return m.TTFTTimeout.or(c.Timeouts.TTFT)
}

// FirstByteFor returns the unary first-byte bound for m: its
// first_byte_timeout when set, 0 (off) when that is false, else
// timeouts.first_byte. m may be nil.
func (c *Config) FirstByteFor(m *Model) time.Duration {
	if m == nil {
		return c.Timeouts.FirstByte.D()
	}
	return m.FirstByteTimeout.or(c.Timeouts.FirstByte)
}

// or resolves a per-model toggle against its global value: unset or true
// is the global, false is 0 (off), a duration is itself.
func (t *Toggle) or(global Duration) time.Duration {
	switch {
	case t == nil:
	case t.Disabled:
		return 0
	case t.Value > 0:
		return t.Value.D()
	}
	return global.D()
}

// ProbingFor reports whether background probing runs for m: its
// probing_enabled when set, else performance.probing_enabled.
func (c *Config) ProbingFor(m *Model) bool {
	if m != nil && m.ProbingEnabled != nil {
		return *m.ProbingEnabled
	}
	return c.Performance.Probing()
}

// AutoSwitchFor reports whether m may switch its active provider on
// measurements; always false when probing is off for m.
func (c *Config) AutoSwitchFor(m *Model) bool {
	if !c.ProbingFor(m) {
		return false
	}
	if m != nil && m.AutoSwitch != nil {
		return *m.AutoSwitch
	}
	return c.Performance.AutoSwitch
}

// ProbeIntervalFor returns how many requests of m pass between probes.
func (c *Config) ProbeIntervalFor(m *Model) int {
	if m != nil && m.ProbeInterval != nil {
		return *m.ProbeInterval
	}
	return c.Performance.ProbeInterval
}
