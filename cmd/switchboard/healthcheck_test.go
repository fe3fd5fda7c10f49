package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer ok.Close()
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "draining", http.StatusServiceUnavailable)
	}))
	defer sick.Close()
	// A port nobody listens on: take one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, okPort, _ := net.SplitHostPort(strings.TrimPrefix(ok.URL, "http://"))

	tests := []struct {
		name   string
		args   []string
		port   string
		code   int
		stdout string
		stderr string
	}{
		{"healthy", []string{"healthcheck", "--url", ok.URL + "/health"}, "", 0, "ok", ""},
		{"a base URL, as usage --url takes", []string{"healthcheck", "--url", ok.URL}, "", 0, ok.URL + "/health ok", ""},
		{"a base URL with a slash", []string{"healthcheck", "--url", ok.URL + "/"}, "", 0, ok.URL + "/health ok", ""},
		{"a base URL behind a prefix", []string{"healthcheck", "--url", ok.URL + "/sb"}, "", 1, "", ok.URL + "/sb/health answered 404"},
		{"default URL reads PORT", []string{"healthcheck"}, okPort, 0, "127.0.0.1:" + okPort + "/health ok", ""},
		{"unhealthy status", []string{"healthcheck", "--url", sick.URL + "/health"}, "", 1, "", "answered 503"},
		{"nobody listening", []string{"healthcheck", "--url", "http://" + closed + "/health"}, "", 1, "", "healthcheck:"},
		{"bad URL", []string{"healthcheck", "--url", "::nope"}, "", 2, "", "healthcheck:"},
		{"bad flag", []string{"healthcheck", "--nope"}, "", 2, "", "flag provided but not defined"},
		{"--help", []string{"healthcheck", "--help"}, "", 0, "usage: switchboard healthcheck [--url URL]", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PORT", tc.port)
			var out, errb bytes.Buffer
			if code := run(tc.args, &out, &errb); code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderr) {
				t.Fatalf("stdout %q (want %q), stderr %q (want %q)", out.String(), tc.stdout, errb.String(), tc.stderr)
			}
		})
	}
}
