package config

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// UnmarshalYAML accepts a number of seconds (2, 0.5) or a Go duration string
// ("500ms", "2m"). Negative values parse; validation rejects them with the
// field's range.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseDuration(n)
	if err != nil {
		return fmt.Errorf("want seconds or a duration such as \"500ms\", got %s", err)
	}
	*d = v
	return nil
}

// MarshalYAML writes the duration as a Go duration string, which
// UnmarshalYAML reads back.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// String prints the value like time.Duration, not as a bare integer.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts false (disabled), true (use the global value) or a
// duration as Duration does.
func (t *Toggle) UnmarshalYAML(n *yaml.Node) error {
	n = deref(n)
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		var on bool
		if err := n.Decode(&on); err != nil {
			return err
		}
		*t = Toggle{Disabled: !on}
		return nil
	}
	v, err := parseDuration(n)
	if err != nil {
		return fmt.Errorf("want seconds, a duration such as \"30s\", or false, got %s", err)
	}
	*t = Toggle{Value: v}
	return nil
}

// MarshalYAML writes false, true or the duration, mirroring UnmarshalYAML.
func (t Toggle) MarshalYAML() (any, error) {
	switch {
	case t.Disabled:
		return false, nil
	case t.Value == 0:
		return true, nil
	}
	return t.Value.MarshalYAML()
}

// parseDuration reads a scalar as seconds or a Go duration. Its error is
// only a description of what was found, for the caller to phrase.
func parseDuration(n *yaml.Node) (Duration, error) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("%s", describe(n))
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		var f float64
		if err := n.Decode(&f); err == nil {
			return seconds(f, n)
		}
	case "!!str":
		s := strings.TrimSpace(n.Value)
		if d, err := time.ParseDuration(s); err == nil {
			return Duration(d), nil
		}
		// A quoted number, e.g. "${TIMEOUT}" kept as a string: still seconds.
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return seconds(f, n)
		}
	}
	return 0, fmt.Errorf("%s", describe(n))
}

func seconds(f float64, n *yaml.Node) (Duration, error) {
	ns := f * float64(time.Second)
	if math.IsNaN(ns) || math.Abs(ns) >= math.MaxInt64 {
		return 0, fmt.Errorf("%s (out of range)", describe(n))
	}
	return Duration(math.Round(ns)), nil
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// describe names what a node holds, for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	n = deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "null"
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

// secondsFields are the durations of the LLM Proxy format, documented
// there in seconds: a bare number is their unit, not a slip.
var secondsFields = map[string]bool{
	"timeouts.open": true, "timeouts.read": true, "timeouts.write": true, "timeouts.ttft": true,
	"retries.backoff_base": true, "models[].ttft_timeout": true,
	"performance.sample_window": true, "performance.config_poll_interval": true,
	"metrics.tps_log.interval": true, "metrics.tps_log.activity_window": true, "metrics.tps_log.eval_window": true,
}

var listIndex = regexp.MustCompile(`\[\d+\]`)

// noteUnitless warns about a duration written as a bare number outside the
// LLM Proxy's seconds fields: it is read as seconds, which is rarely what
// "hedge: {after: 400}" meant (400 s, not 400 ms). The warning names the
// field and what it was read as; a unit ("400ms", "400s") silences it.
func (l *loader) noteUnitless(n *yaml.Node, v reflect.Value, path string) {
	n = deref(n)
	if n.Kind != yaml.ScalarNode || secondsFields[listIndex.ReplaceAllString(path, "[]")] {
		return
	}
	var d Duration
	switch x := v.Addr().Interface().(type) {
	case *Duration:
		d = *x
	case *Toggle:
		d = x.Value
	case *HedgeDelay:
		d = x.Fixed
	default:
		return
	}
	if d == 0 {
		return
	}
	if _, err := strconv.ParseFloat(strings.TrimSpace(n.Value), 64); err != nil {
		return // it has a unit
	}
	v0 := strings.TrimSpace(n.Value)
	l.warnAt(path, "%s has no unit and is read as seconds (%s); write %q or %q to say which", v0, time.Duration(d), v0+"ms", v0+"s")
}
