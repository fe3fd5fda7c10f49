package store

import (
	"context"
	_ "embed"
	"errors"
	"maps"
	"slices"

	"switchboard/internal/limit"
)

// In a Redis Cluster a script may only touch keys of one slot, and a
// decision's keys belong to several owners (the provider's buckets, the
// gateway's, an issued key's, the tenant's buckets and ledger), each
// tagged to its own slot. So there a decision whose keys have more than
// one owner runs as one script per owner, in two round trips: the owners
// other than the tenant first, all sent at once (each server gets its
// share in the same pipeline), then, only if they all admitted, the
// tenant's:
//
//   - each owner's script checks its buckets and applies them only if
//     all of its own fit (the ledger's also checks the day, the live
//     holds and the budget, as on one server);
//   - when every part admitted, the attempt is admitted;
//   - otherwise the parts that admitted are taken back (their debits
//     returned, the ledger's reservation released by a final
//     settlement), and the refusal is the one a single script would have
//     given: the first refusing bucket in the debits' order, else the
//     ledger's refusal.
//
// Between a part's debit and its taking back, another request may find
// that bucket lower than it ends up: a cluster errs towards refusing,
// never towards admitting past a limit. Deciding the tenant last keeps
// that to the shared buckets: a request the provider refuses never
// holds its tenant's buckets or budget. A part whose reply is lost may
// have applied (as on one server, nothing is read as "not charged"): the
// parts known to have admitted are taken back and the decision falls
// back as for any lost reply (in process unbudgeted, 503 budgeted).
//
// A settlement applies in its ledger's slot first (exactly once, as on
// one server); its corrections of other owners' buckets follow only if it
// applied, one script per owner (redis_adjust.lua).

//go:embed redis_adjust.lua
var luaAdjust string

var scriptAdjust = newScript(luaCommon + luaAdjust)

// part is one owner's share of a decision: the indexes of its debits.
type part struct {
	owner  string
	idx    []int
	ledger bool
}

// partsOf splits ds by owner; the ledger's part (owner ledger) comes
// first and is there even without debits when withLedger.
func partsOf(ds []limit.Debit, ledger string, withLedger bool) []part {
	var ps []part
	if withLedger {
		ps = append(ps, part{owner: ledger, ledger: true})
	}
	at := map[string]int{}
	if withLedger {
		at[ledger] = 0
	}
	for i, d := range ds {
		o := owner(d.Key)
		j, ok := at[o]
		if !ok {
			j = len(ps)
			at[o] = j
			ps = append(ps, part{owner: o})
		}
		ps[j].idx = append(ps[j].idx, i)
	}
	return ps
}

func pick(ds []limit.Debit, idx []int) []limit.Debit {
	out := make([]limit.Debit, len(idx))
	for i, j := range idx {
		out[i] = ds[j]
	}
	return out
}

// admitSlots decides a in a cluster (see above); it returns what admit
// and decodeDecision together return on one server.
func (r *Redis) admitSlots(ctx context.Context, a *Admission) (*Decision, error) {
	if r.down.Load() {
		return nil, ErrUnavailable
	}
	ps := partsOf(a.Debits, ledgerOwner(a.Tenant), true)
	subs := make([]*Admission, len(ps))
	xs := make([]*scriptArgs, len(ps))
	calls := make([]*call, len(ps))
	for i, p := range ps {
		sub := *a
		sub.Debits = pick(a.Debits, p.idx)
		if !p.ledger {
			sub.DailyLimit, sub.NoCount, sub.EstTokens = limit.Unlimited, true, 0
			sub.Budgeted, sub.Budget, sub.Hold, sub.HoldRemaining = false, 0, 0, false
		}
		subs[i] = &sub
		xs[i] = r.admitArgs(&sub, p.ledger)
		calls[i] = &call{script: scriptAdmit, cmd: xs[i].cmd}
	}
	cctx, cancel := r.cmdCtx(ctx)
	defer cancel()
	ds := make([]*Decision, len(ps))
	var lost error
	decide := func(from, to int) {
		r.p.doAll(cctx, calls[from:to])
		for i := from; i < to; i++ {
			c := calls[i]
			xs[i].release()
			xs[i] = nil
			if c.err != nil {
				lost = c.err
				continue
			}
			d, err := decodeDecision(c.v, subs[i])
			if err != nil {
				r.log.Error("redis admission reply unreadable", "error", err.Error())
				lost = err
				continue
			}
			ds[i] = d
		}
	}
	// The other owners' buckets first, together; the ledger only once
	// they all fit, so that requests those buckets refuse never hold the
	// tenant's buckets or budget meanwhile.
	decide(1, len(ps))
	// The first refusing bucket in the debits' order, as one script
	// would have reported it; else the ledger's refusal.
	refusal := -1
	var first int
	for i, d := range ds {
		if d != nil && d.Refused == RefusedRate {
			if g := ps[i].idx[d.Index]; refusal < 0 || g < first {
				refusal, first = i, g
			}
		}
	}
	if lost == nil && refusal < 0 {
		decide(0, 1)
		if d := ds[0]; d != nil && d.Refused == RefusedRate {
			refusal, first = 0, ps[0].idx[d.Index]
		}
	} else {
		xs[0].release()
	}
	if lost != nil || refusal >= 0 || ds[0].Refused != Admitted {
		r.takeBack(a, ps, subs, ds)
	}
	switch {
	case lost != nil:
		return nil, lost
	case refusal >= 0:
		d := *ds[refusal]
		d.Index = first
		return &d, nil
	case ds[0].Refused != Admitted:
		return ds[0], nil
	}
	snaps := make([]limit.Snapshot, len(a.Debits))
	for i, p := range ps {
		for j, g := range p.idx {
			snaps[g] = ds[i].Snapshots[j]
		}
	}
	d := ds[0]
	d.Snapshots = snaps
	return d, nil
}

// takeBack undoes the parts of a decision that admitted, without waiting:
// they are queued before this replica's later calls.
func (r *Redis) takeBack(a *Admission, ps []part, subs []*Admission, ds []*Decision) {
	for i, p := range ps {
		d := ds[i]
		if d == nil || d.Refused != Admitted {
			continue
		}
		back := returned(subs[i].Debits)
		if !p.ledger {
			if len(back) > 0 {
				r.enqueueLogged(r.adjustCall(a.ID, back))
			}
			continue
		}
		st := &Settlement{Now: a.Now, ID: a.ID, Tenant: a.Tenant, Minute: d.Minute, WindowSecs: a.WindowSecs,
			WindowStart: d.WindowStart, ReservedDelta: -d.Held, TokenDelta: -max(a.EstTokens, 0), Adjust: back,
			Recorded: d.Recorded, Final: true}
		if !a.NoCount {
			st.RequestDelta = -1
		}
		x := r.settleArgs(st)
		c := &call{script: scriptSettle, cmd: x.cmd}
		c.then = func(_ any, err error) {
			x.release()
			r.logTakeBack(err)
		}
		if !r.p.enqueue(c) {
			x.release()
		}
	}
}

// returned is the debits' amounts given back, as the script charged them
// (each cost within 0..limit).
func returned(ds []limit.Debit) []limit.Debit {
	var out []limit.Debit
	for _, d := range ds {
		if d.Rate.Limit > 0 {
			d.Cost = -min(max(d.Cost, 0), d.Rate.Limit)
			if d.Cost != 0 {
				out = append(out, d)
			}
		}
	}
	return out
}

func (r *Redis) logTakeBack(err error) {
	if err != nil {
		r.log.Warn("redis: a refused admission's debits could not all be taken back; they refill with time",
			"error", err.Error())
	}
}

// enqueueLogged queues c without waiting; a failure is logged.
func (r *Redis) enqueueLogged(c *call) {
	c.then = func(_ any, err error) { r.logTakeBack(err) }
	r.p.enqueue(c)
}

// adjustCall is redis_adjust.lua for ds, all of one owner.
func (r *Redis) adjustCall(id string, ds []limit.Debit) *call {
	cmd := make([]any, 0, 5+4*len(ds))
	cmd = append(cmd, "evalsha", &scriptAdjust.sha, len(ds))
	for _, d := range ds {
		cmd = append(cmd, r.keys.rateKey(d))
	}
	cmd = append(cmd, id, len(ds))
	for _, d := range ds {
		cmd = append(cmd, d.Rate.Limit, windowArg(d.Rate), d.Cost)
	}
	return &call{script: scriptAdjust, cmd: cmd}
}

// splitSettle separates, in a cluster, st's corrections of buckets
// outside its ledger's slot, one call each per owner.
func (r *Redis) splitSettle(st *Settlement) (*Settlement, []*call) {
	if !r.cluster || len(st.Adjust) == 0 {
		return st, nil
	}
	ps := partsOf(st.Adjust, ledgerOwner(st.Tenant), true)
	if len(ps) == 1 {
		return st, nil
	}
	own := *st
	own.Adjust = pick(st.Adjust, ps[0].idx)
	var rest []*call
	for _, p := range ps[1:] {
		rest = append(rest, r.adjustCall(st.ID, pick(st.Adjust, p.idx)))
	}
	return &own, rest
}

// applied reads a settlement's reply: 1 when it applied.
func applied(v any) bool { n, ok := v.(int64); return ok && n == 1 }

// peekSlots is Peek in a cluster: one script per owner, sent together.
func (r *Redis) peekSlots(ctx context.Context, ds []limit.Debit) (any, error) {
	if r.down.Load() {
		return nil, ErrUnavailable
	}
	ps := partsOf(ds, "", false)
	calls := make([]*call, len(ps))
	for i, p := range ps {
		calls[i] = r.peekCall(pick(ds, p.idx))
	}
	cctx, cancel := r.cmdCtx(ctx)
	defer cancel()
	r.p.doAll(cctx, calls)
	out := make([]any, len(ds))
	for i, c := range calls {
		if c.err != nil {
			return nil, c.err
		}
		xs, ok := c.v.([]any)
		if !ok || len(xs) != len(ps[i].idx) {
			return nil, errors.New("peek reply: malformed")
		}
		for j, g := range ps[i].idx {
			out[g] = xs[j]
		}
	}
	return out, nil
}

// peekCall is redis_peek.lua for ds.
func (r *Redis) peekCall(ds []limit.Debit) *call {
	cmd := make([]any, 0, 4+5*len(ds))
	cmd = append(cmd, "evalsha", &scriptPeek.sha, 2*len(ds))
	for _, d := range ds {
		cmd = append(cmd, r.keys.rateKey(d), r.keys.penaltyKey(groupOr(d)))
	}
	cmd = append(cmd, len(ds))
	for _, d := range ds {
		cmd = append(cmd, d.Rate.Limit, windowArg(d.Rate), flag(d.Group != ""))
	}
	return &call{script: scriptPeek, cmd: cmd}
}

// groupOr is d's penalty group, or (without one) its owner, so that the
// unread penalty key shares the bucket's slot.
func groupOr(d limit.Debit) string {
	if d.Group != "" {
		return d.Group
	}
	return owner(d.Key)
}

// maxLedgers bounds the ledgers whose live holds LiveHolds sums.
const maxLedgers = 4096

// noteLedger remembers a ledger this replica took a live hold in.
func (r *Redis) noteLedger(t string) {
	r.mu.Lock()
	if _, ok := r.ledgers[t]; !ok && len(r.ledgers) < maxLedgers {
		r.ledgers[t] = struct{}{}
	}
	r.mu.Unlock()
}

// LiveHolds implements HoldCounter: the live holds of the ledgers this
// replica has admitted budgeted attempts in (each ledger keeps its own,
// in its slot), summed.
func (r *Redis) LiveHolds(ctx context.Context) (int64, error) {
	if r.down.Load() {
		return 0, ErrUnavailable
	}
	r.mu.Lock()
	ts := slices.Sorted(maps.Keys(r.ledgers))
	r.mu.Unlock()
	if len(ts) == 0 {
		return 0, nil
	}
	cctx, cancel := r.cmdCtx(ctx)
	defer cancel()
	pl := r.c.Pipeline()
	for _, t := range ts {
		pl.ZCard(cctx, r.keys.holdsKey(t))
	}
	cmds, err := pl.Exec(cctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		n += c.(interface{ Val() int64 }).Val()
	}
	return n, nil
}
