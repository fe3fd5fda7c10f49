// Package usagelog keeps one row per client request: who asked (tenant,
// key id), for which model, which provider and model served it, how it
// ended (status, attempts), its tokens, its cost in nano-USD (the spend
// ledger's settled amount), its time to first token and duration. Never a
// prompt or an answer.
//
// Rows are recorded off the request path (Log: a bounded queue drained by
// one writer in batches, one transaction each) into a SQLite file of their
// own (DB), pruned past their retention in bounded batches, and read back
// by the admin API and the `switchboard usage` CLI (sums grouped by
// tenant, key, model, served model, provider, day or hour; rows with filters and a
// cursor; CSV, JSON lines and JSON exports). In a fleet every replica also
// publishes its rows to a Redis stream and drains everyone's into its own
// file (Fleet), so any replica answers for the whole fleet.
package usagelog

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"switchboard/internal/tags"
)

// Row is one request.
type Row struct {
	// ID is the row's position in this file (the cursor); 0 until written.
	ID int64 `json:"id"`
	// Time is when the request arrived.
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id"`
	Tenant    string    `json:"tenant"`
	KeyID     string    `json:"key_id"`
	// Model is what the client asked for; ServedModel the gateway model
	// that served it (Model, or a cross-model fallback's name), Provider
	// and ProviderModel its provider and the provider's model. All three
	// are "" when nothing served, and ServedModel is "" on rows written
	// before it was recorded.
	Model         string `json:"model"`
	ServedModel   string `json:"served_model"`
	Provider      string `json:"provider"`
	ProviderModel string `json:"provider_model"`
	Endpoint      string `json:"endpoint"`
	Status        int    `json:"status"`
	Attempts      int    `json:"attempts"`
	// PromptTokens and CompletionTokens are the settled (reported) usage.
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// CostNano is the settled spend, nano-USD; HeldNano what stays
	// reserved for attempts of uncertain outcome (never settled).
	CostNano int64 `json:"cost_nano_usd"`
	HeldNano int64 `json:"held_nano_usd"`
	// Unpriced: some usage of the request had no price (no catalog price,
	// no provider bill): CostNano leaves it out, and cost_usd is null.
	Unpriced bool `json:"unpriced"`
	// TTFTMs is the stream's time to first token (nil: not a stream, or
	// no token).
	TTFTMs     *int64 `json:"ttft_ms"`
	DurationMs int64  `json:"duration_ms"`
	Stream     bool   `json:"stream"`
	// Tags are the request's tags (X-Switchboard-Tags or metadata); nil
	// when it had none.
	Tags map[string]string `json:"tags,omitempty"`
}

// MarshalJSON adds cost_usd beside the exact nano-USD amount (null when
// unpriced: an unknown price is never shown as 0).
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	var cost *float64
	if !r.Unpriced {
		c := usd(r.CostNano)
		cost = &c
	}
	return json.Marshal(struct {
		plain
		Time    string   `json:"time"`
		CostUSD *float64 `json:"cost_usd"`
	}{plain(r), r.Time.UTC().Format(time.RFC3339Nano), cost})
}

func usd(nano int64) float64 { return float64(nano) / 1e9 }

// Filter selects rows. Zero fields select everything.
type Filter struct {
	// From is inclusive, To exclusive.
	From, To                       time.Time
	Tenant, KeyID, Model, Provider string
	// ServedModel selects by the gateway model that served (a fallback's
	// name when one took over).
	ServedModel string
	Status      int
	// StatusClass selects 2, 4 or 5 (2xx, 4xx, 5xx) when Status is 0.
	StatusClass int
	// Tags selects rows carrying every one of these tags.
	Tags tags.Set
}

// Dimensions usage can be grouped by; besides these, "tag:<key>" groups
// by a tag's value (rows without the tag form the group "").
var Dimensions = []string{"tenant", "key", "model", "served_model", "provider", "status", "day", "hour"}

// TagDimension is the prefix of a tag dimension.
const TagDimension = "tag:"

// validDimension reports one of Dimensions or tag:<a valid key>.
func validDimension(d string) bool {
	if k, ok := strings.CutPrefix(d, TagDimension); ok {
		return tags.ValidKey(k)
	}
	return slices.Contains(Dimensions, d)
}

// Group is one group's sums. Keys holds the group's value per dimension
// asked for (days and hours as UTC "2006-01-02" and "2006-01-02T15").
type Group struct {
	Keys             map[string]string
	Requests         int64
	PromptTokens     int64
	CompletionTokens int64
	CostNano         int64
	HeldNano         int64
	// Unpriced counts the requests with usage of no known price.
	Unpriced int64
}

// MarshalJSON flattens the keys beside the sums.
func (g Group) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(g.Keys)+6)
	for k, v := range g.Keys {
		m[k] = v
	}
	m["requests"] = g.Requests
	m["prompt_tokens"] = g.PromptTokens
	m["completion_tokens"] = g.CompletionTokens
	m["cost_nano_usd"] = g.CostNano
	m["cost_usd"] = usd(g.CostNano)
	m["held_nano_usd"] = g.HeldNano
	m["unpriced_requests"] = g.Unpriced
	return json.Marshal(m)
}
