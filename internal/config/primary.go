package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// WritePrimary rewrites the config file so that each model's active
// provider (model name -> provider name) carries `primary: true` and no
// other entry does. It edits the YAML tree, so comments and ${ENV}
// references survive; the file is replaced atomically.
func WritePrimary(path string, active map[string]string) error {
	raw, err := ReadFile(path, MaxConfigBytes)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return err
	}
	if len(doc.Content) == 0 {
		return fmt.Errorf("%s: empty document", path)
	}
	models := mapValue(doc.Content[0], "models")
	if models == nil || models.Kind != yaml.SequenceNode {
		return fmt.Errorf("%s: no models list", path)
	}
	changed := false
	for _, m := range models.Content {
		name := mapValue(m, "name")
		provs := mapValue(m, "providers")
		if name == nil || provs == nil || provs.Kind != yaml.SequenceNode {
			continue
		}
		want, ok := active[name.Value]
		if !ok || want == "" {
			continue
		}
		for _, e := range provs.Content {
			p := mapValue(e, "provider")
			if p == nil || e.Kind != yaml.MappingNode {
				continue
			}
			changed = setPrimary(e, p.Value == want) || changed
		}
	}
	if !changed {
		return nil
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if st, err := os.Stat(path); err == nil {
		_ = os.Chmod(tmp.Name(), st.Mode().Perm())
	}
	return os.Rename(tmp.Name(), path)
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// setPrimary sets or removes `primary: true` on a provider entry; it
// reports whether the entry changed.
func setPrimary(e *yaml.Node, on bool) bool {
	for i := 0; i+1 < len(e.Content); i += 2 {
		if e.Content[i].Value != "primary" {
			continue
		}
		if on {
			if e.Content[i+1].Value == "true" {
				return false
			}
			e.Content[i+1] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}
			return true
		}
		e.Content = append(e.Content[:i], e.Content[i+2:]...)
		return true
	}
	if !on {
		return false
	}
	e.Content = append(e.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "primary"},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	return true
}
