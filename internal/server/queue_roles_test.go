package server

import (
	"testing"

	"github.com/tidwall/gjson"

	"switchboard/internal/store/redistest"
)

// A worker-only replica takes no requests (503 not_ingress with
// Retry-After, nothing enqueued), and /v1/health/detail's queue section
// says its role and whether Redis answers.
func TestQueueWorkerRoleAndHealthDetail(t *testing.T) {
	srv := redistest.Start(t)
	reps := startQueued(t, srv, mockYAML("m", "a"), "", workerOnly)
	w := reps[0]
	a := w.post("/v1/chat/completions", chatBody)
	if a.Status != 503 || gjson.Get(a.Body, "error.code").String() != "not_ingress" || a.Header.Get("Retry-After") == "" {
		t.Fatalf("a request to a worker: %d %v %s", a.Status, a.Header, a.Body)
	}
	d := w.get("/v1/health/detail")
	if q := gjson.Get(d.Body, "queue"); q.Get("role").String() != "worker" || !q.Get("available").Bool() || q.Get("waiting").Int() != 0 {
		t.Fatalf("queue detail: %s", q.Raw)
	}
	if w.mock("a").Calls() != 0 {
		t.Fatal("the refused request reached a provider")
	}
	srv.Kill()
	waitFor(t, func() bool {
		q := gjson.Get(w.get("/v1/health/detail").Body, "queue")
		return q.Get("available").Exists() && !q.Get("available").Bool()
	})
}
