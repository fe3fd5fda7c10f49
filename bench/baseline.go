package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"
)

// The baseline is the bare proxy the gateway is compared with: Go's
// httputil.ReverseProxy flushing every write (FlushInterval -1), with the
// same upstream pool size as the gateway's shared client. It does nothing
// else: no body read, no routing, no auth, no metrics.
func baselineMain(args []string) int {
	fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	up := fs.String("upstream", "", "upstream base URL, e.g. http://127.0.0.1:9000")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	target, err := url.Parse(*up)
	if err != nil || target.Host == "" {
		logf("baseline: bad --upstream %q", *up)
		return 2
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
		},
		FlushInterval: -1,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     60 * time.Second,
		},
		ErrorLog: log.New(os.Stderr, "baseline: ", log.LstdFlags|log.Lmicroseconds),
	}
	// Full duplex lets the transport finish reading the request body after
	// the response headers went out; without it Go's HTTP/1 server closes
	// that body when ReverseProxy flushes the headers, and fast streams are
	// cut mid-way (golang/go#40747). The gateway avoids the same trap by
	// reading the body before sending anything upstream.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})
	return serveChild(*listen, h)
}
