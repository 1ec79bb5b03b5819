// Command agent is the assistant daemon. systemd runs it as
// `agent -config /etc/agent/config.toml`; see README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // agent.timezone must resolve on minimal images without /usr/share/zoneinfo

	"agent/pkg/buildinfo"
	"agent/pkg/channel/builtin"
	"agent/pkg/channel/wecom"
	"agent/pkg/config"
	"agent/pkg/daemon"
	"agent/pkg/localmodels"
	"agent/pkg/logging"
	"agent/pkg/mallocarena"
	"agent/pkg/systemd"
)

func main() {
	// Two malloc arenas: resident memory must not climb thread by thread
	// on a 2 GB box (pkg/mallocarena says what the soak measured).
	mallocarena.Limit(2)
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv))
}

// run is the whole program; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env config.Env) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (default ./config.toml, else /etc/agent/config.toml)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	logJSON := fs.Bool("log-json", false, "log as JSON lines")
	checkOnly := fs.Bool("check-config", false, "validate the configuration and exit (78 when invalid)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, buildinfo.String("agent"))
		return 0
	}

	lv := new(slog.LevelVar)
	level, err := logging.ParseLevel(*logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return 2
	}
	lv.Set(level)
	scrub := &logging.Scrubber{}
	logger := logging.New(stderr, lv, logging.Options{Journald: systemd.UnderJournald(env), JSON: *logJSON}, scrub)

	path := config.Find(*configPath, env)
	cfg, warns, err := config.Load(path, env)
	if err != nil {
		fmt.Fprintf(stderr, "agent: invalid configuration:\n%v\n", err)
		return config.ExitConfig
	}
	scrub.Set(cfg.Secrets())
	for _, w := range warns {
		logger.Warn("config", "warning", w.String())
	}
	if *checkOnly {
		fmt.Fprintf(stdout, "%s: ok\n", cfg.Path)
		return 0
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Once a stop has begun, a second SIGTERM/Ctrl-C gets the default action
	// (terminate now) instead of waiting for the graceful bound.
	go func() { <-ctx.Done(); stop() }()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	hupDone := make(chan struct{})
	defer func() { signal.Stop(hup); close(hupDone) }()
	go func() {
		for {
			select {
			case <-hup:
				select {
				case reload <- struct{}{}:
				default: // a reload is already pending
				}
			case <-hupDone:
				return
			}
		}
	}()

	err = daemon.Run(ctx, daemon.Options{
		Config:       cfg,
		Env:          env,
		Logger:       logger,
		Scrubber:     scrub,
		Notifier:     systemd.Notifier{},
		Models:       &localmodels.Set{},
		Reload:       reload,
		Channels:     builtin.Channels(), // the one list of channels
		FleetChannel: wecom.Channel,      // a fleet carries the WeCom app's conversations (the AI Bot's users are the same)
	})
	if err != nil {
		logger.Error("agent stopped with an error", "err", err)
		var cerr *config.Error
		if errors.As(err, &cerr) {
			return config.ExitConfig
		}
		return 1
	}
	return 0
}
