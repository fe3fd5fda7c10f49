// Package idempotency stores answers by Idempotency-Key so that a repeated
// request is answered from the stored copy without calling a provider. A
// key is claimed before the first request runs, so concurrent duplicates
// wait for the first instead of running too (one upstream call); the
// claim is a lease its owner renews, so it dies with its owner. Three
// stores implement the same claim/finish/release protocol atomically:
// memory, SQLite (its own table in the store's file) and Redis (Lua).
package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"switchboard/internal/config"
)

// State is what a claim found.
type State int

const (
	// Fresh: the caller owns the key now and must Finish or Release it.
	Fresh State = iota
	// Replay: a stored answer for the same body.
	Replay
	// Conflict: the key was used with a different body.
	Conflict
	// Pending: the first request with this key is still running.
	Pending
)

// Record is a stored answer: status, the headers worth replaying and the
// body (a stream's whole event bytes).
type Record struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"-"`
}

// Encode renders r as one JSON line then the raw body.
func (r *Record) Encode() []byte {
	meta, _ := json.Marshal(r)
	return append(append(meta, '\n'), r.Body...)
}

// Decode reads an encoded record.
func Decode(b []byte) (*Record, error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, errors.New("idempotency: malformed record")
	}
	var r Record
	if err := json.Unmarshal(b[:i], &r); err != nil {
		return nil, err
	}
	r.Body = b[i+1:]
	return &r, nil
}

// Limits bound a store. MaxEntries and MaxTotal bound the whole store in
// memory and SQLite (one process's), but each tenant's records on Redis:
// a cluster keeps each tenant's accounting in its own slot, so no script
// sees a fleet-wide total, and one tenant filling its share never stops
// another's answers being stored.
type Limits struct {
	TTL        time.Duration // a stored answer's life
	MaxEntries int
	MaxBytes   int64 // one answer
	MaxTotal   int64 // all answers (each tenant's on Redis)
}

// LimitsOf are the bounds of a config's idempotency section.
func LimitsOf(i *config.Idempotency) Limits {
	return Limits{TTL: i.TTL.D(), MaxEntries: i.MaxEntries, MaxBytes: i.MaxBytes, MaxTotal: i.MaxTotalBytes}
}

// full reports whether an answer of size bytes is over the entry or byte
// bound, with count entries (the caller's claim among them) holding total
// bytes.
func (l Limits) full(count, total, size int64) bool {
	return count > int64(l.MaxEntries) || total+size > l.MaxTotal
}

// Key names one Idempotency-Key's record. Scope identifies it (the
// caller hashes the tenant, endpoint and header into it); Tenant is the
// tenant's ledger name ("" without auth). Memory and SQLite look records
// up by Scope alone; Redis keeps each tenant's records and their
// accounting under the tenant's hash tag, in its ledger's Cluster slot.
type Key struct{ Tenant, Scope string }

// Store is one backend.
//
// A claim is a lease: its owner holds the key for lease and must Renew it
// while its request runs (every third of the lease). An owner that
// crashed (kill -9, a lost machine) stops renewing, so its claim lapses
// within one lease and a retry claims the key afresh instead of waiting
// for an answer that will never come.
type Store interface {
	// Claim looks key up with the request body's hash; on Fresh the caller
	// holds the key (with token) for lease.
	Claim(ctx context.Context, key Key, hash string, lease time.Duration) (State, *Record, string, error)
	// Renew extends a pending claim to lease from now; false when the
	// claim is no longer the caller's (it lapsed and was taken, or was
	// released).
	Renew(ctx context.Context, key Key, token string, lease time.Duration) (bool, error)
	// Finish stores rec under a claim; false when a bound refused it (the
	// key is then released).
	Finish(ctx context.Context, key Key, token string, rec *Record) (bool, error)
	// Release gives a claim up without storing anything.
	Release(ctx context.Context, key Key, token string) error
}

// ErrTooLarge: the answer is over MaxBytes.
var ErrTooLarge = errors.New("idempotency: answer too large to store")

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
