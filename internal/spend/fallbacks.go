package spend

import (
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"switchboard/internal/config"
)

// UnknownFallbackCeiling is the output ceiling, in tokens, assumed for a
// model of an OpenRouter models list that the catalog does not know.
const UnknownFallbackCeiling = 1_000_000

// maxFallbacks bounds the models a request may list (OpenRouter takes a
// few); a longer list is not priced.
const maxFallbacks = 16

// FallbackModels returns the models of OpenRouter's fallback list (a
// top-level "models" array of strings) on an OpenAI-compatible provider;
// ok is false when the body has none, or one that is not such a list.
func FallbackModels(providerType string, body []byte) (models []string, ok bool) {
	if providerType != config.TypeOpenAI && providerType != config.TypeMock {
		return nil, false
	}
	v := gjson.GetBytes(body, "models")
	if !v.IsArray() {
		return nil, false
	}
	arr := v.Array()
	if len(arr) == 0 || len(arr) > maxFallbacks {
		return nil, false
	}
	for _, m := range arr {
		if m.Type != gjson.String || m.Str == "" {
			return nil, false
		}
		models = append(models, m.Str)
	}
	return models, true
}

// FallbackCeiling is the largest output ceiling, in tokens, of the models
// of the body's OpenRouter fallback list (UnknownFallbackCeiling for one
// the catalog does not know): OpenRouter may serve any of them. 0 when the
// body has no such list.
func (c *Catalog) FallbackCeiling(provider, providerType string, body []byte) int64 {
	models, ok := FallbackModels(providerType, body)
	if !ok {
		return 0
	}
	var ceiling int64
	for _, m := range models {
		ceil := int64(UnknownFallbackCeiling)
		if e, ok := c.Lookup(provider, m); ok && e.MaxOutput != Unknown {
			ceil = e.MaxOutput
		}
		ceiling = max(ceiling, ceil)
	}
	return ceiling
}

// quoteFallbacks bounds a request that OpenRouter may serve with its own
// model or any listed one: the largest of their quotes, each under its own
// model's catalog entry (its output ceiling when the request sets no
// limit). One unpriceable model makes the request unpriceable.
func (c *Catalog) quoteFallbacks(r Request, models []string) Quote {
	body, err := sjson.DeleteBytes(r.Body, "models")
	if err != nil {
		return unpriced(Quote{}, "the models fallback list cannot be read")
	}
	var best Quote
	for i, m := range append([]string{r.Model}, models...) {
		sub := r
		sub.Model, sub.Body = m, body
		q := c.Quote(sub)
		if !q.Priced {
			if i > 0 {
				q.Reason = "fallback model " + m + ": " + q.Reason
			}
			return q
		}
		if i == 0 || q.Amount > best.Amount {
			best = q
		}
	}
	return best
}
