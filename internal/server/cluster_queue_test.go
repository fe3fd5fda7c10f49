package server

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/internal/queue"
)

// On a cluster, each provider's queue is its own slot: two providers
// whose tags hash to different masters have their queues there (one of
// them named with a '}', which ends its tag early and still keeps all of
// its keys in one slot), and jobs of both flow through an ingress and a
// worker, streams included.
func providerQueuesSpread(t *testing.T, at redisAt) {
	c := at.client(t, 16, 10*time.Second)
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Skip("needs a cluster")
	}
	ctx := context.Background()
	q := queue.New(c, queue.Options{})
	master := func(prov string) string {
		n, err := cc.MasterForKey(ctx, q.ProviderPrefix(prov)+"format")
		if err != nil {
			t.Fatal(err)
		}
		return n.Options().Addr
	}
	p1, p2 := "x}y", ""
	for i := range 100 {
		if c := "p" + strconv.Itoa(i); master(c) != master(p1) {
			p2 = c
			break
		}
	}
	if p2 == "" {
		t.Fatal("no provider name found on another master")
	}
	yaml := "providers:\n  " + strconv.Quote(p1) + ": {type: mock, mock: {tokens: 5}}\n  " + p2 + ": {type: mock, mock: {tokens: 5}}\n" +
		"models:\n  - name: m1\n    providers: [{provider: " + strconv.Quote(p1) + ", model: x}]\n" +
		"  - name: m2\n    providers: [{provider: " + p2 + ", model: x}]\n"
	reps := startQueuedAt(t, at, yaml, "", nil, ingressOnly, workerOnly)
	for i := range 6 {
		model := []string{"m1", "m2"}[i%2]
		body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
		if i >= 4 {
			body = `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		if a := reps[0].post("/v1/chat/completions", body); a.Status != 200 || (i >= 4 && !strings.Contains(a.Body, "[DONE]")) {
			t.Fatalf("%s request %d: %d %.300s", model, i, a.Status, a.Body)
		}
	}
	for _, p := range []string{p1, p2} {
		if n := reps[1].mock(p).Calls(); n != 3 {
			t.Errorf("provider %s served %d jobs, want 3", p, n)
		}
		// Its scripts ran in its slot (a key of another slot would have
		// failed them, and the requests above).
		if n, err := c.Exists(ctx, q.ProviderPrefix(p)+"format").Result(); err != nil || n != 1 {
			t.Errorf("%s's queue has no format key: %v", p, err)
		}
	}
	if master(p1) == master(p2) {
		t.Fatalf("both queues on %s", master(p1))
	}
	st, err := q.Stats(ctx)
	if err != nil || len(st.Queues) != 2 || st.Leased != 0 || st.Retained != 0 {
		t.Fatalf("stats over the cluster: %+v %v", st, err)
	}
}
