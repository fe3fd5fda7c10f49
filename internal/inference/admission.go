package inference

import (
	"bytes"
	"math"
	"net/http"
	"strconv"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"switchboard/internal/admit"
	"switchboard/internal/front"
	"switchboard/internal/proxy"
	"switchboard/internal/tenant"
	"switchboard/internal/track"
)

// writeRefusal answers a gateway refusal (rate limit, budget, overload,
// unpriceable) in the client's protocol, with Retry-After and, when
// enabled, the refused counter's advisory headers.
func (s *Plane) writeRefusal(w http.ResponseWriter, proto front.Protocol, id *tenant.Identity, ref *admit.Refusal) {
	if snap := s.Snap(); snap != nil && snap.Advisory && id != nil {
		ref.Advice.SetHeaders(w.Header(), snap.AdvisoryNames)
	}
	typ := ref.Type
	if typ == "" {
		typ = front.GatewayErrors.For(ref.Status)
	}
	front.WriteError(w, proto, &front.Error{Status: ref.Status, Type: typ, Code: ref.Code, Param: ref.Param,
		Message: ref.Message, RetryAfter: time.Duration(ref.RetryAfter) * time.Second})
}

// advise sets the advisory rate-limit headers captured at admission.
func (s *Plane) advise(w http.ResponseWriter, in *incoming, res *proxy.Result) {
	if in.snap.Advisory && in.id != nil && res.Permit != nil {
		res.Permit.SetHeaders(w.Header(), in.snap.AdvisoryNames)
	}
}

// withCost adds usage.cost_usd to a JSON answer that reports usage: the
// catalog's price (or the provider's bill), null for an unknown model. It
// runs on every unary answer, so the common case (no cost_usd yet) is one
// lookup and one exact copy with the field spliced in.
func (s *Plane) withCost(body []byte, res *proxy.Result, u track.Usage) []byte {
	if !u.Known {
		return body
	}
	// Read in place: nothing read outlives body.
	usage := gjson.Get(unsafe.String(unsafe.SliceData(body), len(body)), "usage")
	if !usage.IsObject() {
		return body
	}
	cost := s.Admission.CostUSD(res.Candidate.Provider, res.Candidate.Model, proxy.SpendUsage(u))
	val := []byte("null")
	if cost != nil {
		if math.IsInf(*cost, 0) || math.IsNaN(*cost) {
			return body
		}
		val = strconv.AppendFloat(nil, *cost, 'f', -1, 64)
	}
	return setUsageField(body, usage, "cost_usd", val)
}

// setUsageField sets usage.<key> to the raw JSON val. usage must have been
// read from body. When the key is new it is spliced in before the usage
// object's closing brace, in one exact copy; otherwise sjson replaces it.
func setUsageField(body []byte, usage gjson.Result, key string, val []byte) []byte {
	end := usage.Index + len(usage.Raw) - 1 // the usage object's closing brace
	if usage.Index <= 0 || end >= len(body) || body[end] != '}' || usage.Get(key).Exists() {
		out, err := sjson.SetRawBytes(body, "usage."+key, val)
		if err != nil {
			return body
		}
		return out
	}
	comma := len(bytes.TrimSpace(body[usage.Index+1:end])) > 0 // an empty object takes none
	out := make([]byte, 0, len(body)+len(key)+len(val)+4)
	out = append(out, body[:end]...)
	if comma {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, key...)
	out = append(out, '"', ':')
	out = append(out, val...)
	return append(out, body[end:]...)
}
