package proxy

import (
	"context"
	"time"

	"switchboard/internal/provider"
	"switchboard/internal/route"
)

// Count sends one token-count request (Anthropic's count_tokens, Gemini's
// countTokens: ep) to cand, the body with only its model rewritten, and
// returns the upstream's answer. It is not admitted, charged or retried:
// vendors do not bill a count, and the caller answers its own estimate
// when the upstream cannot count.
func (p *Proxy) Count(ctx context.Context, cand *route.Candidate, ep provider.Endpoint, body []byte, header map[string][]string,
	timeout time.Duration) ([]byte, int, error) {
	req, _, _, perr := p.request(&Call{Endpoint: ep, Body: body, Header: header}, cand)
	if perr != nil {
		return nil, 0, perr
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	resp, err := cand.Send.Send(ctx, req)
	if err != nil {
		return nil, 0, err
	}
	out, err := provider.ReadUnary(ctx, resp.Body)
	if err != nil {
		return nil, 0, err
	}
	return out, resp.Status, nil
}
