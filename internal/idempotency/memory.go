package idempotency

import (
	"context"
	"sync"
	"time"
)

// Memory is the in-process store (store.backend: memory).
type Memory struct {
	lim   Limits
	now   func() time.Time
	mu    sync.Mutex
	m     map[string]*memEntry
	total int64
}

type memEntry struct {
	hash, token string
	rec         []byte // nil while pending
	expires     time.Time
}

// NewMemory returns an empty store; now is the clock (nil: time.Now).
func NewMemory(lim Limits, now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{lim: lim, now: now, m: map[string]*memEntry{}}
}

func (s *Memory) Claim(_ context.Context, k Key, hash string, lease time.Duration) (State, *Record, string, error) {
	key := k.Scope
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if e := s.m[key]; e != nil && now.Before(e.expires) {
		switch {
		case e.hash != hash:
			return Conflict, nil, "", nil
		case e.rec == nil:
			return Pending, nil, "", nil
		}
		r, err := Decode(e.rec)
		return Replay, r, "", err
	} else if e != nil {
		s.remove(key, e)
	}
	tok := newToken()
	s.m[key] = &memEntry{hash: hash, token: tok, expires: now.Add(lease)}
	return Fresh, nil, tok, nil
}

func (s *Memory) remove(key string, e *memEntry) {
	s.total -= int64(len(e.rec))
	delete(s.m, key)
}

func (s *Memory) Finish(_ context.Context, k Key, token string, rec *Record) (bool, error) {
	key, b := k.Scope, rec.Encode()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[key]
	if e == nil || e.token != token {
		return false, nil
	}
	if int64(len(b)) > s.lim.MaxBytes {
		s.remove(key, e)
		return false, ErrTooLarge
	}
	full := func() bool { return s.lim.full(int64(len(s.m)), s.total, int64(len(b))) }
	if full() {
		s.sweep(s.now())
	}
	if full() {
		s.remove(key, e)
		return false, nil
	}
	e.rec, e.expires = b, s.now().Add(s.lim.TTL)
	s.total += int64(len(b))
	return true, nil
}

// sweep drops expired entries (bounded work per call: at most 1000).
func (s *Memory) sweep(now time.Time) {
	n := 0
	for k, e := range s.m {
		if n >= 1000 {
			return
		}
		n++
		if !now.Before(e.expires) {
			s.remove(k, e)
		}
	}
}

func (s *Memory) Renew(_ context.Context, k Key, token string, lease time.Duration) (bool, error) {
	key := k.Scope
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	e := s.m[key]
	if e == nil || e.token != token || e.rec != nil || !now.Before(e.expires) {
		return false, nil
	}
	e.expires = now.Add(lease)
	return true, nil
}

func (s *Memory) Release(_ context.Context, k Key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[k.Scope]; e != nil && e.token == token {
		s.remove(k.Scope, e)
	}
	return nil
}
