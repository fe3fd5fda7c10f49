package admit

import (
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"switchboard/internal/config"
)

// Advisory header names under the default prefix.
const (
	HeaderLimit     = config.DefaultAdvisoryPrefix + "-Limit"
	HeaderRemaining = config.DefaultAdvisoryPrefix + "-Remaining"
	HeaderReset     = config.DefaultAdvisoryPrefix + "-Reset"
)

// AdvisoryNames are the three advisory header names of one prefix
// (limits.advisory_prefix), so clients written for another gateway's
// headers (MultiLLM's X-MultiLLM-RateLimit-*) work unchanged.
type AdvisoryNames struct{ Limit, Remaining, Reset string }

// DefaultNames are the names under X-Switchboard-RateLimit.
var DefaultNames = NamesFor(config.DefaultAdvisoryPrefix)

// NamesFor returns the advisory header names under prefix, canonicalized
// once here rather than on every response.
func NamesFor(prefix string) AdvisoryNames {
	return AdvisoryNames{
		Limit:     http.CanonicalHeaderKey(prefix + "-Limit"),
		Remaining: http.CanonicalHeaderKey(prefix + "-Remaining"),
		Reset:     http.CanonicalHeaderKey(prefix + "-Reset"),
	}
}

// EnvAdvisory turns advisory headers on.
const EnvAdvisory = "RATE_LIMIT_HEADERS_ENABLED"

// maxHeaderLimit is the largest valid limit, 2^53-1.
const maxHeaderLimit = 1<<53 - 1

// warnOnce makes the invalid-value warning once per process.
var warnOnce = new(sync.Once)

// ParseAdvisory reads a RATE_LIMIT_HEADERS_ENABLED value: true, 1, yes, on
// (any case, trimmed) turn it on; false, 0, no, off and empty leave it
// off; anything else is invalid (off).
func ParseAdvisory(v string) (on, valid bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes", "on":
		return true, true
	case "", "false", "0", "no", "off":
		return false, true
	}
	return false, false
}

// AdvisoryEnabled reports whether advisory rate-limit headers are on:
// limits.advisory_headers, or RATE_LIMIT_HEADERS_ENABLED. An invalid
// variable leaves them off and logs one warning per process, without the
// value.
func AdvisoryEnabled(cfg *config.Config) bool {
	if cfg != nil && cfg.Limits.AdvisoryHeaders {
		return true
	}
	return advisoryFromEnv(os.LookupEnv, slog.Default())
}

func advisoryFromEnv(lookup func(string) (string, bool), log *slog.Logger) bool {
	v, _ := lookup(EnvAdvisory)
	on, valid := ParseAdvisory(v)
	if !valid {
		warnOnce.Do(func() {
			log.Warn(EnvAdvisory + " has an unrecognized value; advisory rate-limit headers stay off (use true/1/yes/on or false/0/no/off)")
		})
	}
	return on
}

// Advice is the advisory counter of one admission or refusal: limit,
// remaining after reserving this request, and seconds to reset, captured
// at admission. OK is false when no counter applies.
type Advice struct {
	Limit, Remaining, Reset int64
	OK                      bool
}

// SetHeaders writes the advisory headers under names, dropping each
// invalid field: a limit outside 1..2^53-1, a remaining outside 0..limit, a
// reset outside 1..86400 s.
func (a Advice) SetHeaders(h http.Header, names AdvisoryNames) {
	if !a.OK {
		return
	}
	limitOK := a.Limit >= 1 && a.Limit <= maxHeaderLimit
	if limitOK {
		h[names.Limit] = []string{strconv.FormatInt(a.Limit, 10)}
	}
	if limitOK && a.Remaining >= 0 && a.Remaining <= a.Limit {
		h[names.Remaining] = []string{strconv.FormatInt(a.Remaining, 10)}
	}
	if a.Reset >= 1 && a.Reset <= 86400 {
		h[names.Reset] = []string{strconv.FormatInt(a.Reset, 10)}
	}
}

// SetHeaders writes the permit's advisory headers (see Advice.SetHeaders).
func (p *Permit) SetHeaders(h http.Header, names AdvisoryNames) {
	if p != nil {
		p.advice.SetHeaders(h, names)
	}
}
