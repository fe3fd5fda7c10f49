package limit

import "time"

// A sliding window (Rate.Sliding) counts what was admitted in the last
// Window, each admission leaving the count exactly Window after it was
// made, as MultiLLM's counters do: with 2 requests a minute, the first
// admission reports Remaining 1, Reset 60 s, and a refusal 17 s later
// reports Reset 43 s, when the first admission leaves. A token bucket
// (the default) refills continuously instead, so the same pair reads
// Reset 30 s, then 60 s.

// maxSlideEntries bounds one window's log. When full, the two oldest
// entries merge into one at the later time: the count stays exact and an
// entry can only leave later than it would have, never sooner.
const maxSlideEntries = 4096

type slideEntry struct {
	at   time.Time
	cost int64
}

// slide is one sliding window's admissions, oldest first.
type slide struct {
	entries []slideEntry
	used    int64
}

// prune drops the admissions that left the window by now.
func (s *slide) prune(now time.Time, window time.Duration) {
	i := 0
	for i < len(s.entries) && !s.entries[i].at.Add(window).After(now) {
		s.used -= s.entries[i].cost
		i++
	}
	if i > 0 {
		s.entries = append(s.entries[:0], s.entries[i:]...)
	}
	if len(s.entries) == 0 {
		s.used = 0
	}
}

func (s *slide) add(now time.Time, cost int64) {
	if cost <= 0 {
		return
	}
	if len(s.entries) >= maxSlideEntries {
		s.entries[1].cost += s.entries[0].cost
		s.entries = append(s.entries[:0], s.entries[1:]...)
	}
	s.entries = append(s.entries, slideEntry{now, cost})
	s.used += cost
}

// refund takes delta units back from the newest admissions (the debit
// being corrected is among them); the count never goes below zero.
func (s *slide) refund(delta int64) {
	for i := len(s.entries) - 1; i >= 0 && delta > 0; i-- {
		take := min(delta, s.entries[i].cost)
		s.entries[i].cost -= take
		s.used -= take
		delta -= take
	}
}

// snap reports the window: Remaining after what it holds, Reset until its
// oldest admission leaves (the next capacity to free).
func (s *slide) snap(now time.Time, r Rate) Snapshot {
	sn := Snapshot{Limit: r.Limit, Remaining: max(r.Limit-s.used, 0)}
	if len(s.entries) > 0 {
		sn.Reset = max(s.entries[0].at.Add(r.Window).Sub(now), 0)
	}
	return sn
}

// wait is how long until cost fits: until enough of the oldest
// admissions have left.
func (s *slide) wait(now time.Time, r Rate, cost int64) time.Duration {
	over := s.used + cost - r.Limit
	for _, e := range s.entries {
		over -= e.cost
		if over <= 0 {
			return max(e.at.Add(r.Window).Sub(now), 1)
		}
	}
	return r.Window
}

// slideOf returns key's window, pruned to now (creating it empty).
func (m *Memory) slideOf(now time.Time, d Debit) *slide {
	s := m.slides[d.Key]
	if s == nil {
		s = &slide{}
		m.slides[d.Key] = s
	}
	s.prune(now, d.Rate.Window)
	return s
}
