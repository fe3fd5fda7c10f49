package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/config"
	"switchboard/internal/limit"
	"switchboard/internal/redisconn"
)

// The scripts live beside this file. Each is the common helpers followed
// by one decision; go-redis runs them with EVALSHA and, when the server
// answers NOSCRIPT (a restart or SCRIPT FLUSH emptied its cache), sends
// the source once with EVAL. NOSCRIPT means nothing ran, so that second
// send is not a replay.
var (
	//go:embed redis_common.lua
	luaCommon string
	//go:embed redis_admit.lua
	luaAdmit string
	//go:embed redis_settle.lua
	luaSettle string
	//go:embed redis_penalize.lua
	luaPenalize string
	//go:embed redis_peek.lua
	luaPeek string
	//go:embed redis_usage.lua
	luaUsage string
	//go:embed redis_health.lua
	luaHealth string
	//go:embed redis_health_fetch.lua
	luaHealthFetch string

	//go:embed redis_batch.lua
	luaBatch string

	// The admission and the settlement are functions (admit, settle):
	// their own scripts call one, the batch several.
	scriptAdmit       = newScript(luaCommon + luaAdmit + "local now, sec = clock()\nlocal out = admit(KEYS, ARGV, now, sec)\nflush()\nreturn out\n")
	scriptSettle      = newScript(luaCommon + luaSettle + "local now, sec = clock()\nlocal out = settle(KEYS, ARGV, now, sec)\nflush()\nreturn out\n")
	scriptBatch       = newScript(luaCommon + luaAdmit + luaSettle + luaBatch)
	scriptPenalize    = newScript(luaCommon + luaPenalize)
	scriptPeek        = newScript(luaCommon + luaPeek)
	scriptUsage       = newScript(luaCommon + luaUsage)
	scriptHealth      = newScript(luaCommon + luaHealth)
	scriptHealthFetch = newScript(luaCommon + luaHealthFetch)
)

// KeyPrefix starts every key this package writes.
const KeyPrefix = "switchboard:"

// Defaults of RedisOptions.
const (
	DefaultRedisCommandTimeout = 500 * time.Millisecond
	DefaultRedisConnectTimeout = time.Second
	defaultRedisProbe          = 250 * time.Millisecond
	// maxLocalIDs bounds the attempts remembered as admitted by the
	// in-process fallback (their settlements go there too).
	maxLocalIDs = 100_000
)

// ErrUnavailable is returned while Redis does not answer: for a budgeted
// admission (spend fails closed), a settlement (the reservation stays),
// and a usage read.
var ErrUnavailable = errors.New("shared state (redis) is unavailable")

// RedisOptions configure OpenRedis.
type RedisOptions struct {
	// URL: redis://, rediss:// or unix://.
	URL string
	// CommandTimeout bounds each command with its reply; ConnectTimeout a
	// new connection. Zero takes the defaults (500 ms, 1 s).
	CommandTimeout, ConnectTimeout time.Duration
	// Cluster: URL is a seed of a Redis Cluster (Seeds more), whose
	// scripts then run per hash tag (see Admit). Sentinel finds the
	// primary through Redis Sentinel.
	Cluster  bool
	Seeds    []string
	Sentinel config.RedisSentinel
	// ProbeInterval is how often an unavailable Redis is pinged. Default
	// 250 ms.
	ProbeInterval time.Duration
	// Log receives the unavailable/back transitions (nil: slog.Default).
	Log *slog.Logger
}

// Redis is a Store shared by every replica that points at the same
// server: provider and tenant buckets, rolling-day counters, spend windows
// and attempt records, each decision one Lua script run atomically on
// Redis TIME. Health returns the fleet-wide provider health backend over
// the same connection pool.
//
// Failure semantics: a command that fails or times out is never replayed
// (go-redis retries are off) and never read as "nothing charged". While
// Redis is unavailable, unbudgeted admissions fall back to in-process
// buckets (rates fail open: each replica then enforces the full limit on
// its own), budgeted ones return ErrUnavailable (spend fails closed: the
// gateway answers 503), settlements return ErrUnavailable (a hold stays
// where it was), and one warning is logged; a background PING notices when
// Redis answers again, and the next decision goes back to it.
type Redis struct {
	c redis.UniversalClient
	// cluster: a decision whose keys have several owners runs as one
	// script per owner (redis_slots.go).
	cluster bool
	p       *pipe
	keys    keyNames
	o       RedisOptions
	log     *slog.Logger
	// mem is the in-process fallback: unbudgeted admissions and their
	// settlements while Redis is away, and every penalty (cheap, and it
	// keeps the fallback as strict as it can be).
	mem Store

	down      atomic.Bool
	done      chan struct{}
	closeOnce sync.Once
	lastReply atomic.Int64 // unix ns of the last logged error reply

	mu       sync.Mutex
	localIDs map[string]int64    // attempt id → unix s after which it is forgotten
	ledgers  map[string]struct{} // ledgers this replica took live holds in (LiveHolds)
}

// OpenRedis connects to Redis. An unreachable server is not an error: the
// store starts unavailable (as above) and follows the server once it
// answers, so a replica boots even while Redis is down. A URL that does
// not parse is an error.
func OpenRedis(o RedisOptions) (*Redis, error) {
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = DefaultRedisCommandTimeout
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultRedisConnectTimeout
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = defaultRedisProbe
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	conn := redisconn.Options{URL: o.URL, Cluster: o.Cluster, Seeds: o.Seeds, SentinelMaster: o.Sentinel.Master,
		SentinelAddrs: o.Sentinel.Addrs, SentinelPassword: o.Sentinel.Password,
		CommandTimeout: o.CommandTimeout, ConnectTimeout: o.ConnectTimeout}
	c, err := redisconn.Dial(conn)
	if err != nil {
		return nil, err
	}
	r := &Redis{c: c, cluster: o.Cluster, o: o, log: o.Log, mem: NewMemory(), done: make(chan struct{}),
		localIDs: map[string]int64{}, ledgers: map[string]struct{}{}}
	r.p = newPipe(r)
	ctx, cancel := context.WithTimeout(context.Background(), o.ConnectTimeout+o.CommandTimeout)
	defer cancel()
	// The topology only: the URL may carry a password.
	o.Log.Info("admission, spend and provider health are shared through redis", "topology", conn.Kind(),
		"command_timeout", o.CommandTimeout.String(), "connect_timeout", o.ConnectTimeout.String())
	if err := redisconn.Ping(ctx, r.c); err != nil {
		r.failed(context.Background(), err)
	} else {
		// The index of the former per-attempt records: nothing reads it
		// any more (a replica of an older version still running only
		// gains room by its loss). Best effort.
		for _, k := range legacyKeys {
			_ = r.c.Unlink(ctx, k).Err()
		}
	}
	return r, nil
}

// QuietDriver sends go-redis's own log lines to debug (once per process);
// every Redis client the gateway or its CLI opens wants it.
func QuietDriver() { redisconn.Quiet() }

// Available reports whether the last command reached Redis.
func (r *Redis) Available() bool { return !r.down.Load() }

func (r *Redis) cmdCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.o.CommandTimeout)
}

// failed classifies a command's error. The caller leaving is nobody's
// fault; an error reply means Redis answered (logged, rate-limited);
// anything else (refused, reset, timeout, pool exhausted) marks Redis
// unavailable and starts the probe, with one warning per outage.
func (r *Redis) failed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		now := time.Now().UnixNano()
		if last := r.lastReply.Load(); now-last > int64(10*time.Second) && r.lastReply.CompareAndSwap(last, now) {
			r.log.Error("redis refused a command", "error", err.Error())
		}
		return
	}
	// A cluster may have failed over: read its slot map again.
	redisconn.Reload(r.c)
	if r.down.CompareAndSwap(false, true) {
		r.log.Warn("redis is unavailable: provider rate limits and health fall back to this process, "+
			"budgeted requests get 503 until it answers", "error", err.Error())
		go r.probe()
	}
}

// probe pings until Redis answers, then hands decisions back to it.
func (r *Redis) probe() {
	t := time.NewTicker(r.o.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.o.CommandTimeout)
		// Every master must answer: a cluster whose master died is back
		// once a replica took its slots and the slot map says so.
		redisconn.Reload(r.c)
		err := redisconn.Ping(ctx, r.c)
		cancel()
		if err == nil {
			r.down.Store(false)
			r.log.Info("redis answers again: shared rate limits, spend and health resumed")
			return
		}
	}
}

// run executes a script unless Redis is known to be away. It goes through
// the pipe like every other call, so that calls keep their order.
func (r *Redis) run(ctx context.Context, s *script, keys []string, args ...any) (any, error) {
	if r.down.Load() {
		return nil, ErrUnavailable
	}
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", &s.sha, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	cmd = append(cmd, args...)
	cctx, cancel := r.cmdCtx(ctx)
	defer cancel()
	return r.p.do(cctx, &call{script: s, cmd: cmd})
}

// Every key carries a hash tag (the part in braces) naming the owner its
// data belongs with, so that a script's keys share a Redis Cluster slot:
// a tenant's ledger (its daily counters, spend windows, live holds and
// settlement guard) is tagged {t:<tenant>}; a rate bucket by the owner in
// its debit's name ("p:<provider>", "t:<tenant>", "k:<key id>", "g" for
// the gateway-wide buckets); a provider's penalty and health records by
// {p:<provider>}, with its buckets. On one server the tags change
// nothing. A name with a '}' ends its tag early, the same way in every
// key of its owner, so the owner's keys still share one slot.

// owner is the tag of a debit key "<owner>:<kind>" (a key without ':' is
// its own owner).
func owner(k string) string {
	if i := strings.LastIndexByte(k, ':'); i > 0 {
		return k[:i]
	}
	return k
}

// tagged is KeyPrefix + kind + ":{" + the debit key's owner + "}" + the
// rest of the debit key.
func tagged(kind, k string) string {
	o := owner(k)
	return KeyPrefix + kind + ":{" + o + "}" + k[len(o):]
}

func bucketKey(k string) string { return tagged("b", k) }

// rateKey is a debit's counter: a bucket, or a sliding window's log under
// its own name (the two are different Redis types).
func rateKey(d limit.Debit) string {
	if d.Rate.Sliding {
		return tagged("sw", d.Key)
	}
	return bucketKey(d.Key)
}

// windowArg is a rate's window for the scripts in µs, negative for a
// sliding window.
func windowArg(r limit.Rate) int64 {
	if r.Sliding {
		return -micros(r.Window)
	}
	return micros(r.Window)
}

// ledgerOwner is the tag owner of a tenant's (or a key's own) ledger.
func ledgerOwner(t string) string { return "t:" + t }

// TenantTag is the hash tag, braces included, of tenant t's ledger and
// buckets. Other stores name a tenant's records with it (idempotency) so
// that all of a tenant's data shares its slot.
func TenantTag(t string) string { return "{" + ledgerOwner(t) + "}" }

func ledgerKey(kind, t string) string { return KeyPrefix + kind + ":" + TenantTag(t) }

func penaltyKey(g string) string      { return KeyPrefix + "pen:{" + g + "}" }
func dailyKey(t string) string        { return ledgerKey("d", t) }
func dailyMinutesKey(t string) string { return ledgerKey("dm", t) }
func healthKey(p string) string       { return KeyPrefix + "h:{p:" + p + "}" }

// holdsKey is a ledger's live holds (a zset of attempt ids by expiry);
// guardKey the ids of its recently ended attempts that had none (by
// expiry).
func holdsKey(t string) string { return ledgerKey("holds", t) }
func guardKey(t string) string { return ledgerKey("settled", t) }

// windowPrefix names a tenant's windows of secs; ":<start>" completes it.
// The start is numeric, so tenants containing ':' cannot collide.
func windowPrefix(t string, secs int64) string {
	return ledgerKey("w", t) + ":" + strconv.FormatInt(secs, 10)
}

// Keys of earlier versions, dropped at open (best effort; see
// docs/fleet.md for the move to tagged keys): the index of per-attempt
// records (their hashes at "a:<id>" expire on their own), and the
// fleet-wide live holds and guard that the ledgers' own replaced.
var legacyKeys = []string{KeyPrefix + "attempts"}

func i64(v int64) string { return strconv.FormatInt(v, 10) }

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func windowSecs(s int64) int64 {
	if s <= 0 {
		return 86400
	}
	return s
}

// micros is a bucket window in µs, at least 1 (the scripts divide by it).
func micros(d time.Duration) int64 { return max(d.Microseconds(), 1) }

// Admit implements Store with one script (redis_admit.lua).
func (r *Redis) Admit(ctx context.Context, a *Admission) (*Decision, error) {
	if r.cluster && len(partsOf(a.Debits, ledgerOwner(a.Tenant), true)) > 1 {
		d, err := r.admitSlots(ctx, a)
		if err != nil {
			return r.fallbackAdmit(ctx, a)
		}
		r.admitted(a, d)
		return d, nil
	}
	v, err := r.admit(ctx, a)
	if err != nil {
		return r.fallbackAdmit(ctx, a)
	}
	d, err := decodeDecision(v, a)
	if err != nil {
		// A reply of the wrong shape: the script may have applied it, so
		// this is an uncertain outcome, not a refusal.
		r.log.Error("redis admission reply unreadable", "error", err.Error())
		return nil, err
	}
	r.admitted(a, d)
	return d, nil
}

// admitted notes the ledger of a live hold taken (LiveHolds).
func (r *Redis) admitted(a *Admission, d *Decision) {
	if d.Refused == Admitted && d.Recorded {
		r.noteLedger(a.Tenant)
	}
}

// admit runs redis_admit.lua for a (see the script for its keys and
// arguments).
func (r *Redis) admit(ctx context.Context, a *Admission) (any, error) {
	if r.down.Load() {
		return nil, ErrUnavailable
	}
	x := r.admitArgs(a, true)
	cctx, cancel := r.cmdCtx(ctx)
	defer cancel()
	v, err := r.p.do(cctx, &call{script: scriptAdmit, cmd: x.cmd})
	x.release() // sent and answered, or dropped unsent: the pipe is done with it
	return v, err
}

// admitArgs is redis_admit.lua's command for a. Without ledger only a's
// buckets are decided, and the first one's name stands in for the
// ledger's keys (a cluster checks that a script's keys share a slot).
func (r *Redis) admitArgs(a *Admission, ledger bool) *scriptArgs {
	secs := windowSecs(a.WindowSecs)
	n := len(a.Debits)
	x := newArgs(scriptAdmit, 4+2*n, 12+3*n, 1)
	if ledger || n == 0 {
		x.str(r.keys.holdsKey(a.Tenant))
		x.str(r.keys.dailyKey(a.Tenant))
		x.str(r.keys.dailyMinutesKey(a.Tenant))
		x.str(r.keys.windowPrefix(a.Tenant, secs))
	} else {
		k := r.keys.rateKey(a.Debits[0])
		x.str(k)
		x.str(k)
		x.str(k)
		x.str(k)
	}
	for _, d := range a.Debits {
		x.str(r.keys.rateKey(d))
		if d.Group == "" {
			x.str(r.keys.rateKey(d)) // a placeholder: never read without a group
		} else {
			x.str(r.keys.penaltyKey(d.Group))
		}
	}
	x.str(a.ID)
	x.int(int64(n))
	x.int(a.DailyLimit)
	x.flag(!a.NoCount)
	x.int(a.EstTokens)
	x.int(secs)
	x.flag(a.Budgeted)
	x.int(a.Budget)
	x.int(a.Hold)
	x.flag(a.HoldRemaining)
	x.int(int64(a.MaxRetained))
	x.int(int64(Retention / time.Second))
	x.int(DailyMinutes)
	x.int(reclaimBatch)
	x.flag(ledger)
	for _, d := range a.Debits {
		x.int(d.Rate.Limit)
		x.int(windowArg(d.Rate))
		x.int(d.Cost)
		x.flag(d.Group != "")
	}
	return x
}

// fallbackAdmit decides without Redis: in process for an unbudgeted
// attempt, refused for a budgeted one.
func (r *Redis) fallbackAdmit(ctx context.Context, a *Admission) (*Decision, error) {
	if a.Budgeted {
		return nil, ErrUnavailable
	}
	d, err := r.mem.Admit(ctx, a)
	if err == nil && d.Refused == Admitted {
		r.remember(a.ID, a.Now)
	}
	return d, err
}

func (r *Redis) remember(id string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.localIDs) >= maxLocalIDs {
		for k, exp := range r.localIDs {
			if exp < now.Unix() {
				delete(r.localIDs, k)
			}
		}
		if len(r.localIDs) >= maxLocalIDs {
			return // its settlement goes to Redis: token corrections only
		}
	}
	r.localIDs[id] = now.Add(Retention).Unix()
}

// local reports whether the fallback admitted id, forgetting it at a
// final settlement.
func (r *Redis) local(id string, final bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.localIDs[id]
	if ok && final {
		delete(r.localIDs, id)
	}
	return ok
}

// ints reads an array reply of integers.
func ints(v any) ([]int64, bool) {
	xs, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]int64, len(xs))
	for i, x := range xs {
		n, ok := x.(int64)
		if !ok {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

func us(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

func decodeDecision(v any, a *Admission) (*Decision, error) {
	xs, ok := v.([]any)
	if !ok || len(xs) != 13 {
		return nil, fmt.Errorf("admit reply %T of %d elements", v, len(xs))
	}
	head, ok := ints(xs[:11])
	if !ok {
		return nil, errors.New("admit reply: non-integer head")
	}
	refusal, ok1 := ints(xs[11])
	snapsRaw, ok2 := xs[12].([]any)
	if !ok1 || !ok2 {
		return nil, errors.New("admit reply: malformed snapshots")
	}
	now := time.UnixMicro(head[3])
	d := &Decision{Refused: Refused(head[0]), Index: int(head[1]), Wait: us(head[2]), Minute: head[4],
		WindowStart: head[5], Held: head[6], Spent: head[7], Recorded: head[8] == 1}
	reqs, oldest := head[9], head[10]
	switch d.Refused {
	case Admitted:
		d.Snapshots = make([]limit.Snapshot, len(snapsRaw))
		for i, s := range snapsRaw {
			n, ok := ints(s)
			if !ok || len(n) != 3 {
				return nil, errors.New("admit reply: malformed snapshot")
			}
			d.Snapshots[i] = limit.Snapshot{Limit: n[0], Remaining: n[1], Reset: us(n[2])}
		}
		if len(d.Snapshots) != len(a.Debits) {
			return nil, errors.New("admit reply: snapshot count")
		}
		d.Daily = limit.Snapshot{Limit: limit.Unlimited}
		if a.DailyLimit >= 0 {
			d.Daily = limit.Snapshot{Limit: a.DailyLimit, Remaining: max(a.DailyLimit-reqs, 0)}
			if reqs > 0 {
				d.Daily.Reset = DailyExpiry(oldest).Sub(now)
			}
		}
	case RefusedRate:
		if len(refusal) != 5 || d.Index < 0 || d.Index >= len(a.Debits) {
			return nil, errors.New("admit reply: malformed refusal")
		}
		d.Snapshot = limit.Snapshot{Limit: refusal[0], Remaining: refusal[1], Reset: us(refusal[2]),
			Wait: us(refusal[3]), Penalized: refusal[4] == 1}
	case RefusedDaily:
		d.Daily = limit.Snapshot{Limit: a.DailyLimit, Remaining: 0, Reset: d.Wait, Wait: d.Wait}
	case RefusedBudget, RefusedFull:
	default:
		return nil, fmt.Errorf("admit reply: unknown outcome %d", d.Refused)
	}
	return d, nil
}

// Settle implements Store with one script (redis_settle.lua). An attempt
// the fallback admitted settles there; otherwise an unavailable Redis is
// an error and nothing changes, so the reservation stays held.
func (r *Redis) Settle(ctx context.Context, st *Settlement) error {
	if r.local(st.ID, st.Final) {
		return r.mem.Settle(ctx, st)
	}
	if r.down.Load() {
		return ErrUnavailable
	}
	own, rest := r.splitSettle(st)
	x := r.settleArgs(own)
	cctx, cancel := r.cmdCtx(ctx)
	defer cancel()
	v, err := r.p.do(cctx, &call{script: scriptSettle, cmd: x.cmd})
	x.release()
	if err != nil || len(rest) == 0 || !applied(v) {
		return err
	}
	r.p.doAll(cctx, rest)
	for _, c := range rest {
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

// SettleAsync implements AsyncSettler: the settlement is queued behind
// every call this replica queued before it (so this replica's later reads
// see it) and done runs with its outcome.
func (r *Redis) SettleAsync(st *Settlement, done func(error)) {
	if r.local(st.ID, st.Final) || r.down.Load() {
		done(r.Settle(context.Background(), st))
		return
	}
	own, rest := r.splitSettle(st)
	x := r.settleArgs(own)
	c := &call{script: scriptSettle, cmd: x.cmd, then: func(v any, err error) {
		x.release()
		if err != nil || len(rest) == 0 || !applied(v) {
			done(err)
			return
		}
		// The other owners' corrections, once the ledger's applied; done
		// runs with the first error, after the last of them.
		var mu sync.Mutex
		left, first := len(rest), error(nil)
		for _, c := range rest {
			c.then = func(_ any, err error) {
				mu.Lock()
				left--
				if first == nil {
					first = err
				}
				end := left == 0
				mu.Unlock()
				if end {
					done(first)
				}
			}
			if !r.p.enqueue(c) {
				c.then(nil, errClosed)
			}
		}
	}}
	if !r.p.enqueue(c) {
		x.release()
		done(errClosed)
	}
}

// settleArgs is redis_settle.lua's command for st (see the script).
func (r *Redis) settleArgs(st *Settlement) *scriptArgs {
	secs := windowSecs(st.WindowSecs)
	n := len(st.Adjust)
	x := newArgs(scriptSettle, 5+n, 10+3*n, 1)
	x.str(r.keys.holdsKey(st.Tenant))
	x.str(r.keys.guardKey(st.Tenant))
	x.str(r.keys.dailyKey(st.Tenant))
	x.str(r.keys.dailyMinutesKey(st.Tenant))
	x.str(r.keys.windowKey(st.Tenant, secs, st.WindowStart))
	for _, d := range st.Adjust {
		x.str(r.keys.rateKey(d))
	}
	x.int(st.ReservedDelta)
	x.int(st.SettledDelta)
	x.int(st.Minute)
	x.int(st.TokenDelta)
	x.flag(st.Recorded)
	x.flag(st.Final)
	x.int(int64(GuardTTL / time.Second))
	x.int(MaxGuard)
	x.int(DailyMinutes)
	x.int(st.WindowStart + secs + 2*86400)
	x.str(st.ID)
	x.int(int64(n))
	x.int(st.RequestDelta)
	for _, d := range st.Adjust {
		x.int(d.Rate.Limit)
		x.int(windowArg(d.Rate))
		x.int(d.Cost)
	}
	return x
}

// Penalize implements Store: in process always (so the fallback honours
// it too), and in Redis for the fleet. The end is sent as a duration and
// placed on Redis TIME.
func (r *Redis) Penalize(ctx context.Context, now time.Time, group string, until time.Time) error {
	_ = r.mem.Penalize(ctx, now, group, until)
	d := until.Sub(now)
	if d <= 0 {
		return nil
	}
	_, err := r.run(ctx, scriptPenalize, []string{penaltyKey(group)}, i64(micros(d)))
	return err
}

// Peek implements Store; without Redis it reads the fallback's buckets,
// which are the ones deciding then.
func (r *Redis) Peek(ctx context.Context, now time.Time, ds []limit.Debit) ([]limit.Snapshot, error) {
	var v any
	var err error
	if r.cluster {
		v, err = r.peekSlots(ctx, ds)
	} else if r.down.Load() {
		err = ErrUnavailable
	} else {
		cctx, cancel := r.cmdCtx(ctx)
		v, err = r.p.do(cctx, r.peekCall(ds))
		cancel()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return r.mem.Peek(ctx, now, ds)
	}
	xs, ok := v.([]any)
	if !ok || len(xs) != len(ds) {
		return nil, errors.New("peek reply: malformed")
	}
	out := make([]limit.Snapshot, len(ds))
	for i, x := range xs {
		n, ok := ints(x)
		if !ok || len(n) != 4 {
			return nil, errors.New("peek reply: malformed snapshot")
		}
		out[i] = limit.Snapshot{Limit: n[0], Remaining: n[1], Reset: us(n[2]), Penalized: n[3] == 1}
	}
	return out, nil
}

// Usage implements Store. Without Redis it is ErrUnavailable: the
// in-process counters would understate the fleet's spend.
func (r *Redis) Usage(ctx context.Context, q UsageQuery) (*UsageReport, error) {
	secs := windowSecs(q.WindowSecs)
	v, err := r.run(ctx, scriptUsage, []string{dailyKey(q.Tenant), dailyMinutesKey(q.Tenant), windowPrefix(q.Tenant, secs)},
		DailyMinutes, i64(secs))
	if err != nil {
		return nil, ErrUnavailable
	}
	n, ok := ints(v)
	if !ok || len(n) != 6 {
		return nil, errors.New("usage reply: malformed")
	}
	return &UsageReport{Requests: n[0], Tokens: n[1], OldestMinute: n[2], WindowStart: n[3], WindowEnd: n[3] + secs,
		Reserved: n[4], Settled: n[5]}, nil
}

// Close implements Store.
func (r *Redis) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.p.close() // what is queued is sent first
		close(r.done)
		err = errors.Join(r.c.Close(), r.mem.Close())
	})
	return err
}
