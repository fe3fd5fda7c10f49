package config

import (
	"strings"
	"testing"
	"time"
)

func TestRedisDefaultsAndEnv(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		env      map[string]string
		url      string
		fromEnv  bool
		cmd, con time.Duration
	}{
		{"off by default", minimal, nil, "", false, 500 * time.Millisecond, time.Second},
		{"from the file", minimal + "redis:\n  url: redis://r.internal:6379/2\n  command_timeout: 250ms\n  connect_timeout: 2\n",
			nil, "redis://r.internal:6379/2", false, 250 * time.Millisecond, 2 * time.Second},
		{"env sets it", minimal, map[string]string{EnvRedisURL: "redis://127.0.0.1:7000"},
			"redis://127.0.0.1:7000", true, 500 * time.Millisecond, time.Second},
		{"env overrides the file", minimal + "redis: {url: \"redis://file:1\"}\n", map[string]string{EnvRedisURL: "rediss://env:2/0"},
			"rediss://env:2/0", true, 500 * time.Millisecond, time.Second},
		{"empty env changes nothing", minimal + "redis: {url: \"unix:///run/redis.sock\"}\n", map[string]string{EnvRedisURL: ""},
			"unix:///run/redis.sock", false, 500 * time.Millisecond, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse([]byte(tt.yaml), "t.yaml", mapEnv(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			r := c.Redis
			if r.URL != tt.url || r.URLFromEnv != tt.fromEnv || r.CommandTimeout.D() != tt.cmd || r.ConnectTimeout.D() != tt.con {
				t.Fatalf("redis = %+v", r)
			}
			if r.Enabled() != (tt.url != "") {
				t.Fatalf("Enabled() = %v", r.Enabled())
			}
		})
	}
}

func TestRedisErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string // "file:line: field: message piece"
	}{
		{"bad scheme", minimal + "redis:\n  url: http://r:6379\n", nil,
			[]string{`t.yaml:8: redis.url: want redis://host:port[/db]`, `got scheme "http"`}},
		{"no host", minimal + "redis:\n  url: \"redis://:secret@/0\"\n", nil,
			[]string{"t.yaml:8: redis.url: ", "without a host"}},
		{"bad db and port", minimal + "redis:\n  url: redis://r:99999/x\n", nil,
			[]string{`t.yaml:8: redis.url: port must be between 1 and 65535, got "99999"`,
				`t.yaml:8: redis.url: the path selects a database and must be a number such as /0, got "/x"`}},
		{"timeouts out of range", minimal + "redis:\n  command_timeout: 0\n  connect_timeout: 2m\n", nil,
			[]string{"t.yaml:8: redis.command_timeout: must be between 1ms and 60s, got 0s",
				"t.yaml:9: redis.connect_timeout: must be between 1ms and 60s, got 2m0s"}},
		{"unknown field", minimal + "redis:\n  address: r:6379\n", nil,
			[]string{"t.yaml:8: redis.address: unknown field (known: url, command_timeout, connect_timeout, cluster, seeds, sentinel)"}},
		{"seeds without cluster, a bad seed", minimal + "redis:\n  url: redis://a:7000\n  seeds:\n    - b:7001\n    - c\n", nil,
			[]string{"t.yaml:9: redis.seeds: seeds are cluster nodes: set redis.cluster: true",
				`t.yaml:11: redis.seeds[1]: want host:port with a port 1..65535, got "c"`}},
		{"cluster and sentinel", minimal + "redis:\n  url: redis://a:7000\n  cluster: true\n  sentinel: {master: m, addrs: [\"s:26379\"]}\n", nil,
			[]string{"t.yaml:10: redis.sentinel: redis.cluster and redis.sentinel exclude each other"}},
		{"sentinel without master or addrs", minimal + "redis:\n  url: redis://a:7000\n  sentinel:\n    password: x\n    addrs: []\n", nil,
			[]string{"redis.sentinel.master: the primary's name as the sentinels know it is required",
				"redis.sentinel.addrs: must list 1..64 host:port addresses, got 0"}},
		{"cluster without a url", minimal + "redis:\n  cluster: true\n", nil,
			[]string{"redis.url: redis.cluster, redis.seeds and redis.sentinel need redis.url"}},
		{"cluster on a database", minimal + "redis:\n  url: redis://a:7000/3\n  cluster: true\n", nil,
			[]string{`t.yaml:8: redis.url: a cluster has only database 0, got "/3"`}},
		{"bad env value names its source", minimal, map[string]string{EnvRedisURL: "tcp://r:1"},
			[]string{`t.yaml:1: redis.url: want redis://`, `(from SWITCHBOARD_REDIS_URL); got scheme "tcp"`}},
		{"unix without a path", minimal + "redis:\n  url: \"unix://\"\n", nil,
			[]string{"t.yaml:8: redis.url: ", "without a socket path"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse([]byte(tt.yaml), "t.yaml", mapEnv(tt.env))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// A password in the URL never reaches an error message.
func TestRedisErrorsHidePassword(t *testing.T) {
	_, err := parse([]byte(minimal+"redis:\n  url: \"redis://user:hunter2@/x\"\n"), "t.yaml", noEnv)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v", err)
	}
}
