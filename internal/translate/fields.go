package translate

import (
	"maps"
	"slices"
)

// MessagesFields names the top-level fields of an Anthropic Messages
// request that the /v1/messages translation reads by name (to map them or
// to drop them as harmless), sorted.
func MessagesFields() []string { return slices.Sorted(maps.Keys(messagesFields)) }
