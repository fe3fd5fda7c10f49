package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"switchboard/internal/store/redistest"
)

// clusterFields is a redis section's fields for c (redis.cluster).
func clusterFields(c *redistest.Cluster) string {
	return fmt.Sprintf("url: %q, cluster: true, seeds: [\"%s\"]", c.URL, strings.Join(c.Seeds, `", "`))
}

// The binary on a three-master Redis Cluster: the usage stream carries
// every replica's rows, and the queue's ingress with two workers survives
// the worker serving a call being killed.
func TestClusterProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node cluster and gateway processes")
	}
	c := redistest.StartCluster(t)
	t.Run("usage stream", func(t *testing.T) { usageLogFleet(t, clusterFields(c)) })
	t.Run("queue worker killed", func(t *testing.T) {
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		up := newUpstream(t)
		in := startProc(t, "ingress", queueYAMLAt(clusterFields(c), up.URL, "in", ""), "ingress")
		workers := map[string]*proc{
			"w1": startProc(t, "w1", queueYAMLAt(clusterFields(c), up.URL, "w1", ""), "worker"),
			"w2": startProc(t, "w2", queueYAMLAt(clusterFields(c), up.URL, "w2", ""), "worker"),
		}
		_, second := killServingWorker(t, up, in, workers, "c1", false)
		// The survivor goes on serving.
		for i := range 10 {
			id := fmt.Sprintf("after%d", i)
			status, body, err := chat(context.Background(), in.URL, "m", "plain:"+id, i%2 == 0)
			if err != nil || status != 200 || !strings.HasPrefix(content(body), "answer "+id+" by "+second) {
				t.Fatalf("%s: %d %v %q", id, status, err, body)
			}
		}
		// An operator's shell with only SWITCHBOARD_REDIS_URL naming one
		// node: the CLI finds out it is a cluster and reads every queue.
		t.Chdir(t.TempDir())
		t.Setenv("CONFIG_FILE", "")
		t.Setenv("SWITCHBOARD_REDIS_URL", c.URL)
		var out, errb bytes.Buffer
		if code := run([]string{"queue", "stats"}, &out, &errb); code != 0 || !strings.Contains(out.String(), `"waiting"`) {
			t.Fatalf("queue stats from the URL of a cluster node: exit %d: %s%s", code, out.String(), errb.String())
		}
	})
}
