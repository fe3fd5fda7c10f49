// Package admit is the admission and spend façade the server and the
// attempt loop call: authentication of gateway keys, the logical
// concurrency slot, the per-attempt decision (provider slot, RPM/TPM
// buckets, daily count, spend reservation — all or nothing), settlement,
// advisory headers, GET /v1/usage and cost_usd.
//
// # Wiring
//
// Once per process:
//
//	st, err := store.Open(cfg, stateDir, log)       // redis (redis.url), sqlite (default) or memory
//	ctl := admit.New(st, clk, srv.Metrics.Registry) // collectors on the registry
//	ctl.Configure(cfg)                              // and again on every reload
//	defer st.Close()
//
// Per request (after the body is read, before route resolution):
//
//	id, ok := ctl.Authenticate(presentedKey(r))     // !ok: 401; id nil with ok: auth off
//	release, ref := ctl.Enter(ctx, id)              // ref: write it (503 overloaded + Retry-After)
//	defer release()                                 // streams: release when the stream ends
//	ctx, rq := admit.WithRequest(ctx)               // the attempts below are one client request
//	... the attempt loop ...
//	if failed { ctl.Unanswered(rq) }                // no answer: its tpm estimate goes back
//
// Under limits.tenant_counting: request (the default) the caller's own
// counters (its key's and its tenant's rpm, tpm and daily count) are
// debited by the request's first admitted attempt only; its tpm estimate
// is replaced by the tokens its answers used. Provider and global buckets
// and the spend hold are per attempt.
//
// Per provider attempt, right before Send (retries and fallbacks call it
// again for the provider they target):
//
//	pm, ref := ctl.Admit(ctx, admit.AttemptInfo{Identity: id, Provider: cand.Provider,
//		ProviderType: cand.Type, Model: cand.Model, ClientModel: model, Endpoint: string(ep), Body: body})
//	if ref != nil {
//		if ref.Scope == admit.ScopeProvider { continue } // try a distinct provider
//		return ref                                        // tenant, budget or gateway: the request ends
//	}
//	resp, err := send(...)
//	switch {
//	case an answer with its required counters (input and output; explicit
//	     zeros count) or a provider bill: pm.Settle(admit.Usage{Input: ..., Output: ..., CacheRead: ..., CostNanoUSD: bill})
//	case an answer with usage missing a counter: pm.Partial(u); pm.Keep()
//	case HTTP error status, no usage: pm.Fail(); if provider-wide 429 { ctl.Penalize(cand.Provider, statedWait) }
//	case a hedge that lost its race (canceled by the gateway): pm.Lose(known usage)
//	case a stream ended at pm.OutputBound(): pm.Cut(known usage)
//	default (transport error after send, cancel, stream cut upstream): pm.Keep()
//	}
//
// Before Admit, a streamed chat or completions body should ask for its
// usage: body, strip := spend.WithStreamUsage(body) (strip the usage-only
// chunk from the client's stream when strip is true). spend.ReportedBill
// reads a provider's own bill (usage.cost) into Usage.CostNanoUSD.
//
// Exactly one of Settle, Cut, Lose, Keep or Fail ends a Permit and
// releases its provider slot (and its live hold in the store: a settled
// attempt keeps no record); further calls are no-ops. A stream's running
// usage may be reported with Partial (raises the reservation, never
// lowers it). A stream's usage counts as terminal only when it arrived
// after its content ended, or in its terminal event.
//
// Refusals carry Status (429, 503, 400), Code (rate_limit_exceeded,
// token_rate_limit_exceeded, daily_limit_exceeded, budget_exceeded,
// unpriceable_under_budget, overloaded; canceled when the caller left while
// queued: write nothing), Param ("model" for unpriceable), Message,
// RetryAfter (seconds; set it as Retry-After) and Advice (the refused
// counter, whose Reset equals RetryAfter).
//
// Scopes: a provider's bucket, penalty, concurrency slot or an unpriceable
// price on that provider are ScopeProvider (another candidate may be
// priced or free); the caller's own RPM/TPM/daily limit, its budget, the
// global buckets and a full ledger are ScopeRequest.
//
// Advisory headers: when AdvisoryEnabled(cfg) and the caller authenticated,
// pm.SetHeaders(w.Header()) (or Advice()) on the response, and
// ref.Advice.SetHeaders on a gateway 429. They show the caller's own
// counter (key, tenant) or the gateway's, never a provider's bucket.
// Invalid fields are dropped.
//
// GET /v1/usage: ctl.Usage(ctx, id, opts) returns the JSON body (the
// caller's own counters, requests and tokens in the rolling day, spend
// reserved, settled and remaining in the current budget window; with
// advisory headers on, rate_limits: the caller's governing counter for at
// most 32 providers, or models for a tenant; for an operator,
// provider_limits: the providers' own buckets). A read never reserves.
//
// cost_usd: ctl.CostUSD(provider, model, usage) is nil (never 0) for a
// model without a known price. `switchboard prices`: WritePrices(w, cfg).
//
// # Decisions
//
// Fail releases the reservation (down to any partial provider bill): a
// definite HTTP error before generation is not billed by providers, and
// llmshim charges failed attempts only when usage or a bill is reported.
// Keep never releases anything. An unpriced hold is released only by a
// provider bill. Lose and Cut charge what the attempt is known to have
// cost (its input, as reported or the reservation's bound, and the output
// it produced; Lose adds spend.InFlightMargin), never more than its hold.
// The TPM estimate is corrected by Settle, Cut and Lose.
//
// The controller never reads the wall clock directly: everything goes
// through the injected clock.Clock.
package admit
