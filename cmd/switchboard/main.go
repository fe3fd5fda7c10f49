// Command switchboard is an OpenAI-compatible LLM gateway. Its
// subcommands (serve, the default; check; prices; queue; healthcheck;
// version; help) are listed with one line each by `switchboard --help`
// (see cli.go).
//
// Environment: CONFIG_FILE (default config/config.yaml), PORT (4567), BIND
// or PUMA_BIND (0.0.0.0), STATE_DIR (data/), SWITCHBOARD_ENV or RACK_ENV
// (production requires auth.token), SWITCHBOARD_REDIS_URL or
// LLMSHIM_REDIS_URL (share limits, spend and health with the fleet;
// overrides redis.url). The seed systems' other variables are listed in
// docs/migrating.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"switchboard/internal/admit"
	"switchboard/internal/clock"
	"switchboard/internal/config"
	"switchboard/internal/front"
	reloadpkg "switchboard/internal/reload"
	"switchboard/internal/server"
	"switchboard/internal/store"
	"switchboard/internal/visible"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	} else if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			cmd, args = "help", args[1:]
		case "-version", "--version":
			cmd, args = "version", args[1:]
		}
	}
	switch cmd {
	case "serve":
		return serve(args, stdout, stderr)
	case "check":
		return check(args, stdout, stderr)
	case "prices":
		return prices(args, stdout, stderr)
	case "queue":
		return queueCmd(args, stdout, stderr)
	case "usage":
		return usageCmd(args, stdout, stderr)
	case "version":
		fs := flagSet("version", stdout, stderr)
		if code, ok := fs.parse(args); !ok {
			return code
		}
		if code, ok := fs.noArgs(); !ok {
			return code
		}
		fmt.Fprintln(stdout, buildInfo())
		return 0
	case "healthcheck":
		return healthcheck(args, stdout, stderr)
	case "help":
		return help(args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "unknown command %q\n\n%s\n", cmd, usageText())
	return 2
}

// help prints every command's usage line, or, given a command, that
// command's usage and flags (as COMMAND --help does).
func help(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("help", stdout, stderr)
	if code, ok := fs.parse(args); !ok {
		return code
	}
	switch fs.NArg() {
	case 0:
		fmt.Fprintln(stdout, usageText())
		return 0
	case 1:
		if synopsis(fs.Arg(0)) != "" && fs.Arg(0) != "help" {
			return run([]string{fs.Arg(0), "--help"}, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "no command %q\n\n%s\n", strings.Join(fs.Args(), " "), usageText())
	return 2
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// check validates each config file named (or --config, or CONFIG_FILE,
// or the default), printing every problem; it exits 1 when any file fails.
func check(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("check", stdout, stderr)
	path := fs.String("config", "", "config file (or name the files as arguments)")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	paths := fs.Args()
	if *path != "" {
		paths = append([]string{*path}, paths...)
	}
	if len(paths) == 0 {
		paths = []string{envOr("CONFIG_FILE", "config/config.yaml")}
	}
	code := 0
	for _, p := range paths {
		cfg, err := config.Load(p)
		if err != nil {
			fmt.Fprintln(stderr, err)
			code = 1
			continue
		}
		// Warnings name the file's own keys: escaped, as errors are.
		for _, w := range slices.Concat(cfg.Warnings, admit.BudgetWarnings(cfg)) {
			fmt.Fprintln(stdout, "warning:", visible.Escape(w))
		}
		fmt.Fprintf(stdout, "%s: ok (%s, %s)\n", p, plural(len(cfg.Providers), "provider"), plural(len(cfg.Models), "model"))
	}
	return code
}

func prices(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("prices", stdout, stderr)
	path := fs.String("config", "", "config file whose pricing: overrides apply (optional)")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	if *path == "" && fs.NArg() > 0 {
		*path = fs.Arg(0)
	}
	var cfg *config.Config
	if *path != "" {
		c, err := config.Load(*path)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		cfg = c
	}
	if err := admit.WritePrices(stdout, cfg); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs := flagSet("serve", stdout, stderr)
	path := fs.String("config", envOr("CONFIG_FILE", "config/config.yaml"), "config file (env CONFIG_FILE)")
	boot := slog.New(front.LogHandler{Handler: slog.NewTextHandler(stderr, nil)})
	defListen, err := listenDefault(os.Getenv)
	if err != nil {
		boot.Error("bad listen address", "error", err.Error())
		return 1
	}
	listen := fs.String("listen", defListen, "listen address: host or host:port (env BIND or PUMA_BIND, PORT)")
	roleName := fs.String("role", os.Getenv("SWITCHBOARD_ROLE"), "with queue.mode: redis, ingress, worker or all (default; env SWITCHBOARD_ROLE)")
	pprofAddr := fs.String("pprof", os.Getenv("SWITCHBOARD_PPROF"), "serve net/http/pprof on this address, e.g. 127.0.0.1:6060 (off by default; env SWITCHBOARD_PPROF)")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	cfg, err := config.Load(*path)
	if err != nil {
		explicit := os.Getenv("CONFIG_FILE") != ""
		fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "config" })
		if msg := missingConfig(*path, explicit, err); msg != "" {
			fmt.Fprintln(stderr, msg)
			return 1
		}
		boot.Error("cannot load config", "path", *path, "error", err.Error())
		return 1
	}
	production, envName := productionEnv(os.Getenv)
	if production && !cfg.Auth.Enabled() {
		boot.Error(envName + "=production requires auth.token or gateway keys (auth.keys / auth.keys_file) in the config")
		return 1
	}
	logLevel := new(slog.LevelVar)
	log := newLogger(stderr, cfg, logLevel)
	logWarnings(log, cfg)
	logIgnoredPuma(log)

	addr := *listen
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(strings.Trim(addr, "[]"), envOr("PORT", "4567"))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("cannot listen", "addr", addr, "error", err.Error())
		return 1
	}

	if *pprofAddr != "" {
		go servePprof(*pprofAddr, log)
	}

	stateDir := envOr("STATE_DIR", "data/")
	st, err := store.Open(cfg, stateDir, log)
	if err != nil {
		log.Error("cannot open the store", "backend", cfg.Store.Backend, "redis", cfg.Redis.Enabled(), "error", err.Error())
		return 1
	}
	defer st.Close()
	srv := server.New(log, nil, nil)
	srv.Admission = admit.New(st, clock.Real{}, srv.Metrics.Registry)
	idem, closeIdem, err := openIdempotency(cfg, st)
	if err != nil {
		log.Error("cannot open the idempotency store", "error", err.Error())
		return 1
	}
	defer closeIdem()
	srv.SetIdempotency(idem)
	followAdmin, closeAdmin, err := openAdminStore(context.Background(), cfg, st, srv, log)
	if err != nil {
		log.Error("cannot open the admin store", "error", err.Error())
		return 1
	}
	defer closeAdmin()
	closeUsage, err := openUsageLog(cfg, stateDir, srv, log)
	if err != nil {
		log.Error("cannot open the usage log", "error", err.Error())
		return 1
	}
	defer closeUsage()
	if rs, ok := st.(*store.Redis); ok {
		// A fleet: provider health is shared too (see docs/fleet.md).
		srv.JoinFleet(rs)
	}
	srv.Apply(cfg)
	if err := srv.LoadState(stateDir); err != nil {
		log.Warn("ignoring the provider state file", "dir", stateDir, "error", err.Error())
	}
	if cfg.Performance.PrewarmConnections {
		go srv.Prewarm()
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var watches *reloadpkg.Files
	reload := func(trigger string) {
		prev := srv.Snapshot().Config
		next, err := srv.Reload(*path, production)
		if err != nil {
			log.Error("config reload refused; keeping the running config", "trigger", trigger, "error", err.Error())
			return
		}
		logWarnings(log, next)
		setLevel(logLevel, next.Logging.Level)
		watches.Set(watchedFiles(*path, next))
		log.Info("config reloaded", "trigger", trigger, "models", len(next.Models), "providers", len(next.Providers))
		if fields := config.RestartNeeded(prev, next); len(fields) > 0 {
			log.Warn("config reloaded, but these changes take effect only after a restart", "fields", strings.Join(fields, ","))
		}
	}
	watches = reloadpkg.NewFiles(ctx, log, reload)
	if followAdmin {
		go srv.FollowAdmin(ctx)
	}
	go reloadOnSignal(ctx, reloadSignals(), reload)
	stopTracing, err := startTracing(cfg, srv, log)
	if err != nil {
		log.Error("cannot start tracing", "error", err.Error())
		return 1
	}
	defer stopTracing()
	waitQueue, ok := startQueue(ctx, srv, cfg, *roleName, log)
	if !ok {
		return 1
	}
	stopAlerts, err := startAlerts(ctx, cfg, st, srv, log)
	if err != nil {
		log.Error("cannot start alerts", "error", err.Error())
		return 1
	}
	defer stopAlerts()
	watches.Set(watchedFiles(*path, cfg))
	bg := make(chan struct{})
	go srv.SaveEvery(stateDir, 30*time.Second, bg)
	go srv.ReportTPS(bg)

	b := buildInfo()
	log.Info("switchboard listening", "addr", ln.Addr().String(), "config", *path, "models", len(cfg.Models),
		"providers", len(cfg.Providers), "version", b.version, "revision", b.revision)
	serveErr := srv.Serve(ctx, ln)
	// A worker drains its running jobs within the shutdown bound; a job
	// still running after it is redelivered once its lease expires.
	drained := make(chan struct{})
	go func() { waitQueue(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(srv.Snapshot().Config.Timeouts.Shutdown.D()):
		log.Warn("queue: jobs still running at the shutdown bound; they will be redelivered")
	}
	close(bg)
	srv.Prober.Wait()
	if err := srv.SaveState(stateDir); err != nil {
		log.Warn("cannot save provider state", "dir", stateDir, "error", err.Error())
	}
	if final := srv.Snapshot(); final != nil && final.Config.Performance.WritePrimary {
		if err := config.WritePrimary(*path, srv.ActiveProviders()); err != nil {
			log.Warn("cannot write primary back to the config", "path", *path, "error", err.Error())
		}
	}
	if serveErr != nil && !errors.Is(serveErr, context.Canceled) {
		log.Error("server stopped", "error", serveErr.Error())
		return 1
	}
	log.Info("switchboard stopped")
	return 0
}

// logWarnings logs what the config loader let pass but an operator should
// see (unknown fields under config.unknown_fields: warn; keys without any
// operator; route entries that budgeted keys cannot use).
func logWarnings(log *slog.Logger, cfg *config.Config) {
	for _, w := range cfg.Warnings {
		log.Warn("config warning", "problem", w)
	}
	for _, w := range admit.BudgetWarnings(cfg) {
		log.Warn("config: budgeted keys cannot use a provider", "problem", w)
	}
}

func newLogger(w io.Writer, cfg *config.Config, level *slog.LevelVar) *slog.Logger {
	setLevel(level, cfg.Logging.Level)
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.Logging.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(front.LogHandler{Handler: h})
}

func setLevel(v *slog.LevelVar, s string) {
	switch s {
	case "debug":
		v.Set(slog.LevelDebug)
	case "warn":
		v.Set(slog.LevelWarn)
	case "error":
		v.Set(slog.LevelError)
	default:
		v.Set(slog.LevelInfo)
	}
}

// watchedFiles are the files a config reloads from and its poll interval
// (performance.config_poll_interval; 0 = no watching).
func watchedFiles(path string, cfg *config.Config) (time.Duration, map[string]string, map[string][]byte) {
	interval := 2 * time.Second
	if poll := cfg.Performance.ConfigPollInterval; poll != nil {
		interval = poll.D()
	}
	files := map[string]string{path: "file change"}
	// The baselines are the bytes the config was built from, so a write
	// that lands while a reload applies is still seen.
	sums := map[string][]byte{}
	if cfg.Path == path {
		sums[path] = cfg.Sum[:]
	}
	if kp := cfg.Auth.KeysPath; kp != "" {
		files[kp] = "keys file change"
		sums[kp] = cfg.Auth.KeysSum[:]
	}
	return interval, files, sums
}

// reloadSignals subscribes to SIGHUP and SIGUSR1 now, on the caller's
// goroutine: subscribed only inside the reloading goroutine, a SIGHUP sent
// right after "listening" could still find its default action (exit).
func reloadSignals() chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP, syscall.SIGUSR1)
	return ch
}

// reloadOnSignal reloads the config on each signal from ch.
func reloadOnSignal(ctx context.Context, ch chan os.Signal, reload func(trigger string)) {
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-ch:
			reload(sig.String())
		}
	}
}

// servePprof exposes profiling on its own listener, never on the gateway's
// port, so it cannot be reached through the public address by accident.
func servePprof(addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("pprof listening", "addr", addr)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		log.Error("pprof stopped", "error", err.Error())
	}
}
