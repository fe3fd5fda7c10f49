package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The SQLite ledger's journal. A transaction of the ledger decides in
// memory and appends what it changed to one journal row (one INSERT of a
// few dozen bytes per group commit, where writing the tables themselves
// touched half a dozen pages of four B-trees); a checkpoint now and then
// writes the changed counters and holds to the tables and empties the
// journal in one transaction. The file is always the tables plus the
// journal: opening it replays the journal into the tables first.
//
// Entries carry absolute values (a counter after the change, a whole
// hold), not deltas, so replaying them needs nothing but the tables: the
// last entry of a counter wins, a hold is inserted or deleted.
const (
	jUsage byte = 1 + iota // tenant, minute, requests, tokens
	jSpend                 // tenant, window secs, window start, reserved, settled
	jHold                  // id, tenant, window secs, window start, held, created ms, expires s
	jEnd                   // id
)

// maxJournalString bounds a string read from a journal row (tenant names
// and attempt ids are far shorter): a damaged row fails to decode instead
// of allocating what its length prefix says.
const maxJournalString = 1 << 16

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendUsage(b []byte, tenant string, minute, reqs, toks int64) []byte {
	b = append(b, jUsage)
	b = appendStr(b, tenant)
	b = binary.AppendVarint(b, minute)
	b = binary.AppendVarint(b, reqs)
	return binary.AppendVarint(b, toks)
}

func appendSpend(b []byte, k windowKey, reserved, settled int64) []byte {
	b = append(b, jSpend)
	b = appendStr(b, k.tenant)
	b = binary.AppendVarint(b, k.secs)
	b = binary.AppendVarint(b, k.start)
	b = binary.AppendVarint(b, reserved)
	return binary.AppendVarint(b, settled)
}

func appendHold(b []byte, r *record) []byte {
	b = append(b, jHold)
	b = appendStr(b, r.ID)
	b = appendStr(b, r.Tenant)
	b = binary.AppendVarint(b, r.WindowSecs)
	b = binary.AppendVarint(b, r.WindowStart)
	b = binary.AppendVarint(b, r.Held)
	b = binary.AppendVarint(b, r.Created.UnixMilli())
	return binary.AppendVarint(b, r.Expires)
}

func appendEnd(b []byte, id string) []byte {
	return appendStr(append(b, jEnd), id)
}

// entry is one decoded journal entry: the arguments of the statement
// that applies it to the tables (replayStatement), in its column order.
type entry struct {
	kind byte
	args []any
}

// replayStatement applies an entry of kind to the tables.
var replayStatement = map[byte]string{jUsage: qPutUsage, jSpend: qPutSpend, jHold: qInsert, jEnd: qHoldEnd}

var errJournal = errors.New("store: journal row damaged")

// reader decodes a journal row; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errJournal
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string {
	if r.err != nil {
		return ""
	}
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > maxJournalString || uint64(len(r.b)-k) < n {
		r.err = errJournal
		return ""
	}
	s := string(r.b[k : k+int(n)])
	r.b = r.b[k+int(n):]
	return s
}

// next decodes the next entry; false at the end of the row or on damage
// (r.err says which).
func (r *reader) next(e *entry) bool {
	if r.err != nil || len(r.b) == 0 {
		return false
	}
	*e = entry{kind: r.b[0]}
	r.b = r.b[1:]
	switch e.kind {
	case jUsage: // tenant, minute, requests, tokens
		e.args = []any{r.str(), r.int(), r.int(), r.int()}
	case jSpend: // tenant, window secs, window start, reserved, settled
		e.args = []any{r.str(), r.int(), r.int(), r.int(), r.int()}
	case jHold: // id, tenant, window secs, window start, held, created ms, expires s
		e.args = []any{r.str(), r.str(), r.int(), r.int(), r.int(), r.int(), r.int()}
	case jEnd: // id
		e.args = []any{r.str()}
	default:
		r.err = fmt.Errorf("%w: unknown entry kind %d", errJournal, e.kind)
	}
	return r.err == nil
}
