package health

import "regexp"

// Quota reasons, as metric labels.
const (
	ReasonPaymentRequired = "payment_required"
	ReasonRateLimited     = "rate_limited"
	ReasonQuotaExhausted  = "quota_exhausted"
)

var quotaBody = regexp.MustCompile(`(?i)insufficient_quota|billing\s*(limit|exceeded|issue)|credit\s*(balance|limit|exhausted|insufficient)|payment|plan\s*(limit|exceeded)|usage\s*limit|quota\s*(exceeded|reached|limit)`)

// Quota reports whether an upstream answer means "out of quota": 402 and
// 429 always, 403 only when the body says so (a plain 403 is a permission
// problem that waiting will not fix).
func Quota(status int, body []byte) (reason string, ok bool) {
	switch status {
	case 402:
		return ReasonPaymentRequired, true
	case 429:
		return ReasonRateLimited, true
	case 403:
		if quotaBody.Match(body) {
			return ReasonQuotaExhausted, true
		}
	}
	return "", false
}
