package config

import "slices"

// Tags configures request tags (see README, "Tags"): the header
// X-Switchboard-Tags, optionally the body's metadata, and which keys each
// tenant may or must send.
type Tags struct {
	// FromMetadata also reads tags from the body's metadata object on
	// /v1/chat/completions and /v1/responses (OpenAI's request field;
	// string values). Default false: metadata is forwarded as it is and
	// only the header carries tags.
	FromMetadata bool `yaml:"from_metadata"`
	// MetricKeys are the tag keys counted by
	// switchboard_tag_requests_total and switchboard_tag_cost_nano_usd_total
	// (label tag and value). Default none, at most 5 keys.
	MetricKeys []string `yaml:"metric_keys"`
	// MetricValues bounds the distinct values counted per metric key; a
	// further value counts as "_other". Default 100, range 1..10,000.
	MetricValues int `yaml:"metric_values"`
	// Default applies to every tenant not under Tenants; nil = any tags,
	// none required.
	Default *TagRules `yaml:"default"`
	// Tenants maps a tenant name (from the keys or the admin API) to its
	// rules.
	Tenants map[string]*TagRules `yaml:"tenants"`
}

// TagRules limit one tenant's tags.
type TagRules struct {
	// Allowed keys; nil = any key (a required key is always allowed).
	Allowed []string `yaml:"allowed"`
	// Required keys: a request without one is refused (400 invalid_tags).
	Required []string `yaml:"required"`
}

// maxMetricKeys bounds tags.metric_keys (each is a label set).
const maxMetricKeys = 5

// A tag key's grammar lives here, where the tags: section is validated at
// load; package tags reads the same grammar for the keys clients send.
const (
	// MaxTags is the most tags one request may carry.
	MaxTags = 10
	// MaxTagKey bounds a tag key's length in bytes.
	MaxTagKey = 64
)

// ValidTagKey reports a key of 1..MaxTagKey letters, digits, '_', '.' or
// '-': safe in SQL expressions built from it, CSV cells, logs and metric
// labels.
func ValidTagKey(k string) bool {
	if k == "" || len(k) > MaxTagKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func (l *loader) tagsDefaults(c *Config) {
	setDefault(l, "tags.metric_values", &c.Tags.MetricValues, 100)
}

func (l *loader) validateTags(c *Config) {
	t := &c.Tags
	l.intRange("tags.metric_values", int64(t.MetricValues), 1, 10_000)
	if len(t.MetricKeys) > maxMetricKeys {
		l.errAt("tags.metric_keys", "at most %d keys (each value is a metric series), got %d", maxMetricKeys, len(t.MetricKeys))
	}
	l.tagKeys("tags.metric_keys", t.MetricKeys)
	check := func(path string, r *TagRules) {
		if r == nil {
			return
		}
		l.tagKeys(path+".allowed", r.Allowed)
		l.tagKeys(path+".required", r.Required)
	}
	check("tags.default", t.Default)
	names := make([]string, 0, len(t.Tenants))
	for n := range t.Tenants {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		check("tags.tenants."+n, t.Tenants[n])
	}
}

func (l *loader) tagKeys(path string, keys []string) {
	if len(keys) > MaxTags {
		l.errAt(path, "at most %d keys (a request carries at most %d tags), got %d", MaxTags, MaxTags, len(keys))
	}
	for i, k := range keys {
		if !ValidTagKey(k) {
			l.errAt(path, "key %q is not a tag key: 1 to %d letters, digits, '_', '.' or '-'", k, MaxTagKey)
		} else if slices.Contains(keys[:i], k) {
			l.errAt(path, "key %q is listed twice", k)
		}
	}
}
