package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Metered modes run the gateway as it is deployed for paying tenants: the
// client's key is a tenant key from a keys file (RPM, TPM, a daily count
// and a USD budget), the model is priced, so every provider attempt takes
// one admission decision (buckets, rolling day, spend hold) and one
// settlement in the store named by Mode.Meter. The limits are far above
// what the machine can send, so nothing is refused: the figures are the
// cost of the metering, not of refusals.
const (
	meterSQLite = "sqlite"
	meterMemory = "memory"
	meterRedis  = "redis"
)

// meteredConfig is gatewayConfig with a tenant key, a price for the
// upstream model and the store of meter. Redis is at redisAddr.
func meteredConfig(upURL, keysFile, dbPath, meter, redisAddr string) string {
	cfg := configHead("metered ("+meter+"): tenant key, priced model, budget", upURL) + `pricing:
  fake:
    ` + upstreamModel + `: {input: 1, output: 2, context: 131072, max_output: 4096}
auth:
  keys_file: ` + keysFile + `
`
	switch meter {
	case meterSQLite:
		cfg += "store:\n  backend: sqlite\n  path: " + dbPath + "\n"
	case meterMemory:
		cfg += "store:\n  backend: memory\n"
	case meterRedis:
		cfg += "redis:\n  url: redis://" + redisAddr + "/0\n"
	}
	return cfg
}

// meteredKeys is the keys file: the harness's token as one tenant with
// every limit set, all far above what two cores can send (a budget of a
// million USD holds about 4 × 10^8 requests of this size).
func meteredKeys(token string) ([]byte, error) {
	return json.Marshal(map[string]any{token: map[string]any{
		"tenant": "bench", "rpm": 1_000_000_000, "tpm": 1_000_000_000_000, "daily_requests": 1_000_000_000,
		"budget_usd": 1_000_000, "budget_window_secs": 86400,
	}})
}

// writeGatewayConfig writes the gateway's config for m and returns its path.
func (h *harness) writeGatewayConfig(m Mode, upURL string) (string, error) {
	cfg := filepath.Join(h.tmp, "gateway.yaml")
	body := gatewayConfig(upURL, h.token)
	if m.Meter != "" {
		keys := filepath.Join(h.tmp, "keys.json")
		b, err := meteredKeys(h.token)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(keys, b, 0o600); err != nil {
			return "", err
		}
		// A fresh ledger per mode, so that every mode starts from an
		// empty file as a new deployment would.
		db := filepath.Join(h.tmp, "metered.db")
		for _, suf := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(db + suf)
		}
		redisAddr := ""
		if m.Meter == meterRedis {
			if h.redis == nil {
				return "", fmt.Errorf("metered redis mode without a redis-server")
			}
			redisAddr = h.redis.addr
		}
		body = meteredConfig(upURL, keys, db, m.Meter, redisAddr)
	}
	if m.NoUsageLog {
		body += "usage_log:\n  enabled: false\n"
	}
	if m.Traced {
		if h.sink == nil {
			s, err := startSink()
			if err != nil {
				return "", err
			}
			h.sink = s
		}
		body += tracingConfig(h.sink.url)
	}
	if m.Queue {
		if h.redis == nil {
			return "", fmt.Errorf("queue mode without a redis-server")
		}
		body = strings.Replace(body, "store:\n  backend: memory\n", "", 1) +
			"redis:\n  url: redis://" + h.redis.addr + "/0\nqueue:\n  mode: redis\n"
	}
	return cfg, os.WriteFile(cfg, []byte(body), 0o600)
}

// redisBinary finds redis-server ("" when it is not installed).
func redisBinary() string {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	return ""
}

// startRedis runs a throwaway redis-server on loopback for a metered
// Redis mode: no persistence, its own directory, killed with the mode.
func (h *harness) startRedis() (*child, error) {
	bin := redisBinary()
	if bin == "" {
		return nil, fmt.Errorf("redis-server is not installed")
	}
	var last error
	for range 3 { // a probed port can be taken before redis binds it
		addr, err := freePort()
		if err != nil {
			return nil, err
		}
		_, port, _ := net.SplitHostPort(addr)
		dir, err := os.MkdirTemp(h.tmp, "redis-")
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--daemonize", "no", "--loglevel", "warning")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		logPath := filepath.Join(h.logDir, "redis.log")
		lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = lf, lf
		err = cmd.Start()
		lf.Close()
		if err != nil {
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		c := &child{name: "redis", cmd: cmd, pid: cmd.Process.Pid, addr: addr, log: logPath}
		if last = waitRedis(addr, 5*time.Second); last == nil {
			return c, nil
		}
		c.stop()
	}
	return nil, fmt.Errorf("redis-server did not answer: %v", last)
}

// waitRedis pings addr until it answers PONG.
func waitRedis(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			_, err = conn.Write([]byte("PING\r\n"))
			if err == nil {
				var line string
				line, err = bufio.NewReader(conn).ReadString('\n')
				if err == nil && !strings.HasPrefix(line, "+PONG") {
					err = fmt.Errorf("PING answered %q", strings.TrimSpace(line))
				}
			}
			conn.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return last
}
