package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// keyState is what the test knows of one issued key.
type keyState struct {
	Tier    int  `json:"tier"`
	Revoked bool `json:"revoked"`
}

// A gateway process killed with SIGKILL in the middle of a burst of admin
// calls leaves the store whole: after a restart on the same SQLite file
// every acknowledged change is there (a change in flight at the kill is
// either wholly there or wholly absent), the audit log replays to exactly
// the key table, its sequence has no gap, and every key still issued
// works.
func TestSIGKILLDuringAdminBurstKeepsStoreWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gateway as a process")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`providers:
  p: {type: mock, mock: {tokens: 2}}
models:
  - name: m
    providers: [{provider: p}]
auth:
  keys:
    sk-crash-admin: {tenant: ops, role: admin}
store:
  backend: sqlite
  path: %s
logging:
  level: warn
`, filepath.Join(dir, "state.db"))), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, cfg)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 10 * time.Second}
	call := func(ctx context.Context, addr, method, path, body string) (int, []byte, error) {
		req, _ := http.NewRequestWithContext(ctx, method, "http://"+addr+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer sk-crash-admin")
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	if st, b, err := call(context.Background(), g.addr, "POST", "/admin/v1/tenants", `{"name":"crash","rpm":1000}`); err != nil || st != 201 {
		t.Fatalf("tenant: %d %s %v", st, b, err)
	}

	// Each worker drives its own keys: create, raise the tier, and revoke
	// every third; acked is the state acknowledged last, pending the change
	// in flight (at most one per worker).
	type tracked struct {
		acked   keyState
		pending *keyState
		secret  string
	}
	var mu sync.Mutex
	keys := map[string]*tracked{}
	var acks atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				st, b, err := call(ctx, g.addr, "POST", "/admin/v1/keys", fmt.Sprintf(`{"name":"w%d-k%d","tenant":"crash"}`, w, i))
				if err != nil || st != 201 {
					if err == nil {
						t.Errorf("create: %d %s", st, b)
					}
					return // the kill cuts calls in flight; an unacked create may or may not be there
				}
				var k struct{ ID, Secret string }
				_ = json.Unmarshal(b, &k)
				tk := &tracked{secret: k.Secret}
				mu.Lock()
				keys[k.ID] = tk
				mu.Unlock()
				acks.Add(1)
				for step := 1; step <= 3 && ctx.Err() == nil; step++ {
					next := tk.acked
					method, path, body := "PATCH", "/admin/v1/keys/"+k.ID, fmt.Sprintf(`{"tier":%d}`, step)
					if step == 3 {
						if i%3 != 0 {
							break
						}
						method, path, body = "DELETE", "/admin/v1/keys/"+k.ID, ""
						next.Revoked = true
					} else {
						next.Tier = step
					}
					mu.Lock()
					tk.pending = &next
					mu.Unlock()
					st, b, err := call(ctx, g.addr, method, path, body)
					if err != nil {
						return
					}
					if st != 200 {
						t.Errorf("%s %s: %d %s", method, path, st, b)
						return
					}
					mu.Lock()
					tk.acked, tk.pending = next, nil
					mu.Unlock()
					acks.Add(1)
				}
			}
		}()
	}
	g.killMidBurst(t, &acks, 400, stop, &wg)
	if acks.Load() < 400 {
		t.Fatalf("only %d admin calls acknowledged before the kill:\n%s", acks.Load(), g.out.String())
	}

	g2 := startGateway(t, cfg)
	bg := context.Background()
	st, b, err := call(bg, g2.addr, "GET", "/admin/v1/keys", "")
	if err != nil || st != 200 {
		t.Fatalf("list after restart: %d %v", st, err)
	}
	var list struct {
		Data []struct {
			ID, Source string
			keyState
		}
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	table := map[string]keyState{}
	for _, k := range list.Data {
		if k.Source == "admin" {
			table[k.ID] = k.keyState
		}
	}

	// Every acknowledged change is there.
	for id, tk := range keys {
		got, ok := table[id]
		switch {
		case !ok:
			t.Errorf("acknowledged key %s is gone", id)
		case got != tk.acked && (tk.pending == nil || got != *tk.pending):
			t.Errorf("key %s is %+v; acknowledged %+v (in flight: %+v)", id, got, tk.acked, tk.pending)
		}
	}

	// The audit log replays to exactly the table, without a gap.
	replay := map[string]*keyState{}
	var seq int64
	for after := int64(0); ; {
		st, b, err := call(bg, g2.addr, "GET", fmt.Sprintf("/admin/v1/audit?after=%d&limit=1000", after), "")
		if err != nil || st != 200 {
			t.Fatalf("audit: %d %v", st, err)
		}
		var page struct {
			Data []struct {
				Seq            int64
				Action, Target string
				Fields         struct{ Tier *int }
			}
			HasMore   bool  `json:"has_more"`
			NextAfter int64 `json:"next_after"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Data {
			if seq++; e.Seq != seq {
				t.Fatalf("audit sequence jumps from %d to %d", seq-1, e.Seq)
			}
			ks := replay[e.Target]
			switch e.Action {
			case "key.create":
				replay[e.Target] = &keyState{}
			case "key.update":
				if ks != nil && e.Fields.Tier != nil {
					ks.Tier = *e.Fields.Tier
				}
			case "key.revoke":
				if ks != nil {
					ks.Revoked = true
				}
			}
		}
		if !page.HasMore {
			break
		}
		after = page.NextAfter
	}
	if len(replay) != len(table) {
		t.Errorf("the audit log creates %d keys, the table holds %d", len(replay), len(table))
	}
	for id, ks := range replay {
		if got, ok := table[id]; !ok || got != *ks {
			t.Errorf("key %s: the audit log replays to %+v, the table holds %+v (present %v)", id, *ks, got, ok)
		}
	}
	t.Logf("%d calls acknowledged before SIGKILL; after restart %d issued keys, %d audit rows, all consistent", acks.Load(), len(table), seq)

	// Keys still issued work after the restart; revoked ones do not.
	n := 0
	for id, tk := range keys {
		if n++; n > 20 {
			break
		}
		req, _ := http.NewRequest("GET", "http://"+g2.addr+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+tk.secret)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{false: 200, true: 401}[table[id].Revoked]; resp.StatusCode != want {
			t.Errorf("key %s (revoked %v) after restart: %d, want %d", id, table[id].Revoked, resp.StatusCode, want)
		}
	}
}
