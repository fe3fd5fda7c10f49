package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"switchboard/internal/queue"
	"switchboard/internal/store/redistest"
)

// Issue 27, item 5, through a real worker: a waiting job whose gen is not
// an integer sits at the head of its provider's queue. It is dead-lettered
// and logged, and the client's request behind it is served: before, every
// lease failed on it and the jobs behind it timed out.
func TestQueueMalformedHeadDoesNotStopWorkers(t *testing.T) {
	srv := redistest.Start(t)
	reps := startQueued(t, srv, mockYAML("m", "a"), "", ingressOnly, workerOnly)
	c, _ := queue.Dial(srv.URL, time.Second, time.Second, 4)
	defer c.Close()
	q := queue.New(c, queue.Options{})
	bad := &queue.Job{ID: queue.NewID(), Provider: "a", Tier: 1000, Timeout: time.Minute,
		Request: []byte(`{"path":"/v1/chat/completions","model":"m"}` + "\n" + chatBody)}
	// Enqueued while no worker can lease it: corrupt, then wake them.
	reps[1].stop()
	if _, err := q.Enqueue(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	c.HSet(context.Background(), q.ProviderPrefix("a")+"j:"+bad.ID, "gen", "zero")
	reps = append(reps, startQueued(t, srv, mockYAML("m", "a"), "", workerOnly)...)
	start := time.Now()
	if a := reps[0].post("/v1/chat/completions", chatBody); a.Status != 200 {
		t.Fatalf("the job behind a malformed one: %d %.300s", a.Status, a.Body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("served after %s", d)
	}
	d, err := q.DeadJob(context.Background(), bad.ID)
	if err != nil || !strings.Contains(d.Error, "field gen") {
		t.Fatalf("the malformed job is not in the DLQ: %+v %v", d, err)
	}
	if logs := reps[2].logs.String(); !strings.Contains(logs, "skipped a waiting job") || !strings.Contains(logs, bad.ID) {
		t.Fatalf("not logged:\n%s", logs)
	}
}

// A job envelope without a key digest (an ingress with auth off, or a
// forged record) is refused by a worker whose config requires keys: never
// run as auth-off's unlimited operator identity, dead-lettered after
// max_deliveries with the reason logged.
func TestQueueKeylessJobRefusedWhereKeysAreRequired(t *testing.T) {
	srv := redistest.Start(t)
	yaml := mockYAML("m", "a") + "auth:\n  keys:\n    sk-acme: {tenant: acme}\n"
	reps := startQueued(t, srv, yaml, "", workerOnly)
	c, _ := queue.Dial(srv.URL, time.Second, time.Second, 4)
	defer c.Close()
	q := queue.New(c, queue.Options{})
	j := &queue.Job{ID: queue.NewID(), Provider: "a", Timeout: time.Minute,
		Request: []byte(`{"path":"/v1/chat/completions","model":"m"}` + "\n" + chatBody)}
	if _, err := q.Enqueue(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		d, err := q.DeadJob(context.Background(), j.ID)
		return err == nil && strings.Contains(d.Error, "no API key") && d.Deliveries == 3
	})
	if n := reps[0].mock("a").Calls(); n != 0 {
		t.Fatalf("the keyless job reached the provider %d times", n)
	}
	if !strings.Contains(reps[0].logs.String(), "requires one") {
		t.Fatalf("not logged:\n%s", reps[0].logs.String())
	}
}
