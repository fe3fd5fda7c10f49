package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// versionSegment is an API version as the last path segment of a base
// URL: /v1, /v1beta, /v1alpha2.
var versionSegment = regexp.MustCompile(`/v\d+((alpha|beta)\d*)?$`)

// versionPaths are the version path each provider type's base_url ends
// with: its requests are the base plus /messages (anthropic) or
// /models/{model}:generateContent (gemini), so without it every request
// is a 404 that reads like a wrong model.
var versionPaths = map[string]string{
	TypeAnthropic: "https://api.anthropic.com/v1",
	TypeGemini:    "https://generativelanguage.googleapis.com/v1beta",
}

// checkVersionPath warns when an anthropic or gemini base_url lacks the
// version path (a proxy in front of the API may not need one: a warning,
// not an error).
func (l *loader) checkVersionPath(base string, p *Provider) {
	example, ok := versionPaths[p.Type]
	if !ok || p.BaseURL == "" {
		return
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil || versionSegment.MatchString(strings.TrimRight(u.Path, "/")) {
		return
	}
	l.warnAt(base+".base_url", "type %s: the base_url normally ends with the API's version path, e.g. %s (requests go to the base_url plus %s); got %q",
		p.Type, example, map[string]string{TypeAnthropic: "/messages", TypeGemini: "/models/{model}:generateContent"}[p.Type], redactURL(p.BaseURL))
}

// warnAt records a warning at path, formatted as an error is.
func (l *loader) warnAt(path, format string, args ...any) {
	e := &FieldError{File: l.file, Line: l.lineOf(path), Field: path, Msg: fmt.Sprintf(format, args...)}
	l.warnings = append(l.warnings, e.Error())
}
