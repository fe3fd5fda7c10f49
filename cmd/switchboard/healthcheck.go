package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"time"
)

// healthcheck asks a running gateway for /health and exits 0 on a 200. It
// exists for the container image's HEALTHCHECK: the runtime image is
// scratch, with no curl or wget to do it.
func healthcheck(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("healthcheck", stdout, stderr)
	url := fs.String("url", "", "a gateway's base URL (http://host:4567, as usage --url takes) or its /health or /ready URL (default http://127.0.0.1:$PORT, PORT defaulting to 4567)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *url == "" {
		*url = "http://" + net.JoinHostPort("127.0.0.1", envOr("PORT", "4567"))
	}
	*url = healthURL(*url)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 2
	}
	// A one-shot client: this process makes exactly one request and exits.
	resp, err := (&http.Client{Timeout: *timeout}).Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "healthcheck: %s answered %d: %s\n", *url, resp.StatusCode, body)
		return 1
	}
	fmt.Fprintf(stdout, "healthcheck: %s ok\n", *url)
	return 0
}

// healthURL is the URL to ask: a base URL (no path, or one not ending in
// /health or /ready, as a gateway behind a path prefix has) gets /health.
func healthURL(u string) string {
	p, err := neturl.Parse(u)
	if err != nil || p.Scheme == "" || p.Host == "" || strings.HasSuffix(p.Path, "/health") || strings.HasSuffix(p.Path, "/ready") {
		return u // as given: a bad one is refused by the request
	}
	p.Path = strings.TrimRight(p.Path, "/") + "/health"
	return p.String()
}
