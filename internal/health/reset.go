package health

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"switchboard/internal/jsoncheck"
)

// MaxStatedWait caps any wait an upstream states: a day.
const MaxStatedWait = 86400 * time.Second

// StatedWait returns how long the upstream asked us to wait, first that
// applies: Retry-After (seconds or HTTP-date); the largest of
// x-ratelimit-reset-requests/-tokens (seconds, Unix time or durations such
// as "6m0s", "100ms", "1d") and anthropic-ratelimit-*-reset (RFC 3339); JSON
// reset, reset_time, reset_at or retry_after_ms at the top level or under
// "error"; prose like "try again in 1m30s". Invalid values are ignored and
// huge ones saturate at MaxStatedWait.
func StatedWait(h http.Header, body []byte, now time.Time) (time.Duration, bool) {
	if d, ok := retryAfter(h.Get("Retry-After"), now); ok {
		return d, true
	}
	var best time.Duration
	found := false
	for _, k := range []string{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens"} {
		if d, ok := resetValue(h.Get(k), now); ok && (!found || d > best) {
			best, found = d, true
		}
	}
	for k, vs := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "anthropic-ratelimit-") && strings.HasSuffix(lk, "-reset") && len(vs) > 0 {
			if t, err := time.Parse(time.RFC3339, strings.TrimSpace(vs[0])); err == nil {
				if d := clampWait(t.Sub(now)); !found || d > best {
					best, found = d, true
				}
			}
		}
	}
	if found {
		return best, true
	}
	if len(body) > 0 {
		if d, ok := bodyWait(body, now); ok {
			return d, true
		}
	}
	return 0, false
}

func clampWait(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	if d > MaxStatedWait {
		return MaxStatedWait
	}
	return d
}

func secondsWait(s float64) (time.Duration, bool) {
	if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
		return 0, false
	}
	if s > MaxStatedWait.Seconds() {
		return MaxStatedWait, true
	}
	return time.Duration(s * float64(time.Second)), true
}

func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return secondsWait(s)
	}
	if t, err := http.ParseTime(v); err == nil {
		return clampWait(t.Sub(now)), true
	}
	return 0, false
}

// resetValue reads an x-ratelimit-reset-* value: a number up to a day is
// seconds from now, a larger one a Unix time; otherwise a duration.
func resetValue(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > MaxStatedWait.Seconds() {
			return unixWait(s, now)
		}
		return secondsWait(s)
	}
	return parseLooseDuration(v)
}

func unixWait(s float64, now time.Time) (time.Duration, bool) {
	// Milliseconds since the epoch are a common variant of a Unix time.
	if s > 1e12 && s < 1e15 {
		s /= 1000
	}
	if math.IsNaN(s) || s < 0 || s > 1e12 {
		return 0, false
	}
	sec, frac := math.Modf(s)
	return clampWait(time.Unix(int64(sec), int64(frac*1e9)).Sub(now)), true
}

// parseLooseDuration accepts Go durations plus a day unit ("1d", "1d2h").
func parseLooseDuration(v string) (time.Duration, bool) {
	var total time.Duration
	if i := strings.Index(v, "d"); i > 0 {
		days, err := strconv.ParseFloat(v[:i], 64)
		if err != nil || days < 0 {
			return 0, false
		}
		if days > 1 {
			return MaxStatedWait, true
		}
		total = time.Duration(days * 24 * float64(time.Hour))
		v = v[i+1:]
		if v == "" {
			return clampWait(total), true
		}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, false
	}
	return clampWait(total + d), true
}

var proseWait = regexp.MustCompile(`(?i)(?:try again|retry|resets?|available again|wait)\s+(?:in|after)\s+(?:about\s+)?((?:\d+(?:\.\d+)?\s*(?:ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)\s*)+)`)

var prosePart = regexp.MustCompile(`(?i)(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)`)

func bodyWait(body []byte, now time.Time) (time.Duration, bool) {
	if jsoncheck.Valid(body) {
		for _, prefix := range []string{"", "error."} {
			r := gjson.ParseBytes(body)
			if v := r.Get(prefix + "retry_after_ms"); v.Exists() {
				if ms := v.Float(); ms >= 0 {
					return secondsWait(ms / 1000)
				}
			}
			for _, k := range []string{"reset", "reset_time", "reset_at"} {
				v := r.Get(prefix + k)
				if !v.Exists() {
					continue
				}
				if v.Type == gjson.Number {
					if d, ok := unixWait(v.Float(), now); ok {
						return d, true
					}
				} else if t, err := time.Parse(time.RFC3339, v.String()); err == nil {
					return clampWait(t.Sub(now)), true
				}
			}
		}
	}
	m := proseWait.FindSubmatch(body)
	if m == nil {
		return 0, false
	}
	var total float64
	for _, p := range prosePart.FindAllSubmatch(m[1], -1) {
		n, err := strconv.ParseFloat(string(p[1]), 64)
		if err != nil {
			continue
		}
		switch u := strings.ToLower(string(p[2])); {
		case strings.HasPrefix(u, "ms") || strings.HasPrefix(u, "milli"):
			total += n / 1000
		case strings.HasPrefix(u, "s"):
			total += n
		case strings.HasPrefix(u, "m"):
			total += n * 60
		case strings.HasPrefix(u, "h"):
			total += n * 3600
		}
	}
	return secondsWait(total)
}
