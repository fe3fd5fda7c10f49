package spend

import (
	"maps"
	"slices"
)

// RequestFields names every top-level request field whose cost effect the
// pricing knows or refuses by name (over the OpenAI, Anthropic and Gemini
// request shapes), sorted: the fields the gateway reads when it prices a
// request.
func RequestFields() []string {
	names := slices.Collect(maps.Keys(knownControls))
	names = slices.AppendSeq(names, maps.Keys(explained))
	slices.Sort(names)
	return names
}
