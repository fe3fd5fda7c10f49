package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// rawKeyed sends one keyed request on its own connection, reads the whole
// answer and closes the connection at once, as a client that got what it
// wanted does.
func rawKeyed(t *testing.T, g *gateway, key, body string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(g.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: %s\r\nContent-Length: %d\r\n\r\n%s", key, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Issue 27, item 3: a client that read a whole answer and hung up at once
// finds it stored: its retry is a replay, never a second upstream call.
// Before, the store step checked the request's context after the answer
// was complete, and 8 of 40 such answers were lost.
func TestIdempotentAnswerStoredWhenTheClientHangsUp(t *testing.T) {
	g := startGateway(t, mockYAML("m", "a"))
	const tries = 100
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)
		lost := 0
		for i := range tries {
			key := fmt.Sprintf("hangup-%v-%d", stream, i)
			if status, got := rawKeyed(t, g, key, body); status != 200 || stream && !strings.HasSuffix(got, "data: [DONE]\n\n") {
				t.Fatalf("first answer: %d %q", status, got)
			}
			if a := g.post("/v1/chat/completions", body, "Idempotency-Key", key); a.Status != 200 || a.Header.Get("Idempotent-Replayed") != "true" {
				lost++
			}
		}
		if lost > 0 {
			t.Errorf("stream=%v: %d of %d complete answers were not stored", stream, lost, tries)
		}
		if calls := g.mock("a").Calls(); calls != int64(tries*map[bool]int{false: 1, true: 2}[stream]) {
			t.Errorf("stream=%v: %d upstream calls for %d keys each way", stream, calls, tries)
		}
	}
}

// Issue 27, item 4: an answer stored under an Idempotency-Key is replayed
// to another key of the tenant only within that key's own access and
// limits, and the replay counts as its request: a key with rpm 0 gets no
// replay, a key with daily_requests 1 gets one, a key limited to other
// models gets 404.
func TestIdempotentReplayChecksTheReplayingKey(t *testing.T) {
	g := startGateway(t, adminYAML)
	must := g.must
	must(g.adminCall("POST", "/admin/v1/tenants", `{"name":"team"}`), 201)
	issue := func(spec string) string {
		return gjson.Get(must(g.adminCall("POST", "/admin/v1/keys", `{"tenant":"team",`+spec+`}`), 201).Body, "secret").String()
	}
	open, zero, once, other := issue(`"name":"open"`), issue(`"name":"zero","rpm":0`), issue(`"name":"once","daily_requests":1`),
		issue(`"name":"other","models":["m2"]`)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	as := func(key string) answer {
		return g.post("/v1/chat/completions", body, "Authorization", "Bearer "+key, "Idempotency-Key", "order-7")
	}
	must(as(open), 200)
	if a := as(zero); a.Status != 429 || gjson.Get(a.Body, "error.code").String() != "rate_limit_exceeded" || a.Header.Get("Retry-After") == "" {
		t.Errorf("a key with rpm 0 got %d %v %s", a.Status, a.Header.Get("Idempotent-Replayed"), a.Body)
	}
	if a := as(once); a.Status != 200 || a.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the daily key's first replay: %d %s", a.Status, a.Body)
	}
	if a := as(once); a.Status != 429 || gjson.Get(a.Body, "error.code").String() != "daily_limit_exceeded" {
		t.Errorf("the daily key's second replay (its second request today): %d %s", a.Status, a.Body)
	}
	if a := as(other); a.Status != 404 {
		t.Errorf("a key limited to other models: %d %s", a.Status, a.Body)
	}
	if n := g.mock("a").Calls(); n != 1 {
		t.Errorf("%d upstream calls; replays call none", n)
	}
}
