package spend

import (
	"math"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// WithStreamUsage makes an OpenAI-compatible chat or completions stream
// report its usage: when the body streams and stream_options.include_usage
// is not already true, it is set. added tells the caller to strip the
// usage-only chunk from the client's stream, since the client did not ask
// for it. Call it before Admit, so the reservation prices the final body.
func WithStreamUsage(body []byte) (out []byte, added bool) {
	if !gjson.GetBytes(body, "stream").Bool() || gjson.GetBytes(body, "stream_options.include_usage").Bool() {
		return body, false
	}
	out, err := sjson.SetBytes(body, "stream_options.include_usage", true)
	if err != nil {
		return body, false
	}
	return out, true
}

// ReportedBill reads a provider-reported bill from an answer or a usage
// chunk: usage.cost in USD (OpenRouter and compatible gateways). nil when
// absent or not a non-negative number.
func ReportedBill(doc []byte) *int64 {
	c := gjson.GetBytes(doc, "usage.cost")
	if c.Type != gjson.Number {
		return nil
	}
	f := c.Float()
	if !(f >= 0) || math.IsInf(f, 0) || f > float64(MaxAmount)/NanoPerUSD {
		return nil
	}
	n := int64(math.Round(f * NanoPerUSD))
	return &n
}
