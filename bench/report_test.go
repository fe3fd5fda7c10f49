package main

import (
	"strings"
	"testing"
)

// A smoke run's table says, above and below it, that its figures mean
// nothing, and judges no target (a MISS there read as a failure).
func TestSmokeReportSaysFiguresMeanNothing(t *testing.T) {
	checks := []Check{{Name: "gateway overhead", Mode: "closed-hi", Want: "< 1.1", Value: 3, Pass: false}}
	var text, md strings.Builder
	writeText(&text, &Report{Smoke: true, Checks: checks})
	writeMarkdown(&md, &Report{Smoke: true, Checks: checks})
	for name, out := range map[string]string{"text": text.String(), "markdown": md.String()} {
		if !strings.Contains(out, "these figures mean nothing") || strings.Contains(out, "MISS") || !strings.Contains(out, "n/a") {
			t.Errorf("%s:\n%s", name, out)
		}
	}
	if strings.Count(text.String(), smokeNote) != 2 {
		t.Errorf("the note is not above and below the table:\n%s", text.String())
	}
	text.Reset()
	writeText(&text, &Report{Checks: checks})
	if strings.Contains(text.String(), "mean nothing") || !strings.Contains(text.String(), "MISS") {
		t.Errorf("a full run:\n%s", text.String())
	}
}
