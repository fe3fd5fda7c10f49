package config

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
)

// limits.window values.
const (
	WindowBucket  = "bucket"
	WindowSliding = "sliding"
)

// Windows selects how the rpm and tpm limits count, per dimension:
// bucket (default) refills continuously; sliding counts what was admitted
// in the last minute, each admission leaving it 60 s later (MultiLLM's
// counters). YAML: one value for both (window: sliding) or a mapping
// (window: {rpm: sliding, tpm: bucket}). It applies to the global,
// provider and tenant limits alike.
type Windows struct {
	RPM, TPM string
}

// Sliding reports whether dimension ("rpm" or "tpm") uses a sliding window.
func (w Windows) Sliding(dimension string) bool {
	if dimension == "tpm" {
		return w.TPM == WindowSliding
	}
	return w.RPM == WindowSliding
}

var windowKinds = []string{WindowBucket, WindowSliding}

// UnmarshalYAML reads a scalar or an {rpm, tpm} mapping.
func (w *Windows) UnmarshalYAML(n *yaml.Node) error {
	n = deref(n)
	kind := func(v *yaml.Node) (string, error) {
		if v.Kind != yaml.ScalarNode || !slices.Contains(windowKinds, v.Value) {
			return "", fmt.Errorf("want bucket or sliding, got %s", describe(v))
		}
		return v.Value, nil
	}
	switch n.Kind {
	case yaml.ScalarNode:
		k, err := kind(n)
		if err != nil {
			return err
		}
		*w = Windows{RPM: k, TPM: k}
		return nil
	case yaml.MappingNode:
		out := Windows{RPM: WindowBucket, TPM: WindowBucket}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, err := kind(deref(n.Content[i+1]))
			if err != nil {
				return fmt.Errorf("%s: %v", n.Content[i].Value, err)
			}
			switch n.Content[i].Value {
			case "rpm":
				out.RPM = k
			case "tpm":
				out.TPM = k
			default:
				return fmt.Errorf("unknown dimension %q (known: rpm, tpm)", n.Content[i].Value)
			}
		}
		*w = out
		return nil
	}
	return fmt.Errorf("want bucket, sliding or {rpm: ..., tpm: ...}, got %s", describe(n))
}
