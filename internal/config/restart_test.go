package config

import (
	"reflect"
	"testing"
)

func TestRestartNeeded(t *testing.T) {
	load := func(extra string) *Config {
		c, err := parse([]byte(minimal+extra), "t.yaml", mapEnv(nil))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := load("")
	tests := []struct {
		extra string
		want  []string
	}{
		{"", nil},
		{"timeouts: {open: 5, read: 20, write: 5}\nperformance: {config_poll_interval: 10, connection_max_age: 60}\n", nil},
		{"logging: {format: json}\n", []string{"logging.format"}},
		{"store: {backend: memory}\nredis: {url: \"redis://r:6379\"}\n", []string{"store.backend", "redis.url"}},
		{"redis: {url: \"redis://r:6379\"}\nqueue: {mode: redis, depth: 5, worker_concurrency: 3}\nidempotency: {ttl: 60}\n",
			[]string{"redis.url", "queue.mode", "queue.worker_concurrency", "idempotency"}},
		{"queue: {depth: 5, lease: 30, dlq_max: 7}\n", nil},
	}
	for _, tt := range tests {
		if got := RestartNeeded(base, load(tt.extra)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: %v, want %v", tt.extra, got, tt.want)
		}
	}
}
