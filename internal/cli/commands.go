package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/auth"
	"github.com/loupe-dev/loupe/internal/pgcluster"
	"github.com/loupe-dev/loupe/internal/pricing"
	"github.com/loupe-dev/loupe/internal/server"
	"github.com/loupe-dev/loupe/internal/services"
	"github.com/loupe-dev/loupe/internal/store"
	"github.com/loupe-dev/loupe/internal/trace"
)

func newRootCommand(p *Program) *cobra.Command {
	cfg := &config{program: p}
	short := "Loupe: a dev UI and a durable agent engine for Go"
	if p.Demo == nil {
		short = "Loupe's dev UI, durable runs and inbox for this program's agents"
	}
	root := &cobra.Command{
		Use:           p.name(),
		Short:         short,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cfg.bindCommon(root.PersistentFlags())
	// DATABASE_URL is read here rather than as the flag's default, so that --help never prints it:
	// it usually holds a password.
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if cfg.DatabaseURL == "" {
			cfg.DatabaseURL = os.Getenv("DATABASE_URL")
		}
		if cfg.ReadDatabaseURL == "" {
			cfg.ReadDatabaseURL = os.Getenv("LOUPE_READ_DATABASE_URL")
		}
		cfg.dataDirGiven = cmd.Flags().Changed("data-dir") || os.Getenv("LOUPE_DATA_DIR") != ""
	}
	root.AddCommand(newServeCommand(cfg), newMigrateCommand(cfg), newDBCommand(cfg), newUserCommand(cfg),
		newWorkerCommand(cfg), newRunCommand(cfg), newInterruptsCommand(cfg), newVersionCommand())
	root.AddCommand(newReplayCommand(cfg))                       // replay.go
	root.AddCommand(newRunsCommand(cfg))                         // runs.go
	root.AddCommand(newStartCommand(cfg))                        // start.go
	root.AddCommand(newActionsCommand(cfg))                      // actions.go
	root.AddCommand(newPolicyCommand(cfg))                       // policy.go
	root.AddCommand(newDatasetCommand(cfg), newEvalCommand(cfg)) // eval.go
	root.AddCommand(newMCPCommand(cfg))                          // mcp.go
	if name := p.name(); name != "devui" {
		nameCommands(root, name)
	}
	return root
}

// nameCommands writes the program's own name where the commands' help says devui, so that a
// program built on package devui tells its users to run its commands, not devui's.
func nameCommands(cmd *cobra.Command, name string) {
	cmd.Long = strings.ReplaceAll(cmd.Long, "devui ", name+" ")
	cmd.Short = strings.ReplaceAll(cmd.Short, "devui ", name+" ")
	for _, c := range cmd.Commands() {
		nameCommands(c, name)
	}
}

// groupCommand is a command that only holds subcommands: run bare, it prints its help; given an
// unknown subcommand, it fails instead of printing help and succeeding.
func groupCommand(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for %q; see %s --help", args[0], cmd.CommandPath(), cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
}

func newServeCommand(cfg *config) *cobra.Command {
	var (
		dev       bool
		noMigrate bool
		bodyLimit string
		eng       engineOptions
		projects  []string
		policies  string
		prices    string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the UI and the APIs (starts the embedded PostgreSQL when DATABASE_URL is empty)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, _ := cmd.Flags().GetString("addr")
			limit, err := parseSize(bodyLimit)
			if err != nil {
				return fmt.Errorf("--body-limit %q: want bytes, or a number with K, M or G (binary: 16M is 16 MiB)", bodyLimit)
			}
			table, err := loadPrices(prices)
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, serveOptions{addr: addr, dev: dev, migrate: !noMigrate, bodyLimit: limit, engine: eng,
				genkitProjects: absPaths(projects), policyFile: policies, prices: table})
		},
	}
	cmd.Flags().String("addr", envOr("LOUPE_ADDR", "127.0.0.1:4000"), "listen address (env LOUPE_ADDR)")
	cmd.Flags().BoolVar(&dev, "dev", false, "local mode: skip sign-in; only allowed on a loopback address")
	cmd.Flags().BoolVar(&noMigrate, "no-migrate", false, "do not apply pending migrations at start")
	cmd.Flags().StringVar(&bodyLimit, "body-limit", "16M", "largest accepted request body, K, M and G binary (trace ingest has its own: LOUPE_INGEST_MAX_BODY)")
	bindGenkitProjects(cmd, &projects)
	cmd.Flags().StringVar(&policies, "policy-file", os.Getenv("LOUPE_POLICY_FILE"),
		"approval policy (YAML rules that approve, deny or gate interrupts; see README), loaded at start and again when it changes; the UI's policy editor is then read-only (env LOUPE_POLICY_FILE)")
	// Read from the environment when the command runs, as DATABASE_URL is: --help never prints it.
	cmd.Flags().StringVar(&cfg.ReadDatabaseURL, "read-database-url", "",
		"a read replica of the database: the trace explorer (trace list, trace and span pages, their APIs, Genkit's trace reads) and the runs list read from it, everything else from the primary; reads lag the primary by the replica's delay (env LOUPE_READ_DATABASE_URL)")
	cmd.Flags().StringVar(&prices, "prices", os.Getenv("LOUPE_PRICES"),
		"model prices (YAML or JSON: USD per million input and output tokens per model, over the built-in list prices; see README), read at start (env LOUPE_PRICES)")
	eng.bind(cmd.Flags(), 8)
	return cmd
}

// loadPrices is the price table of --prices: the file over the built-in table, or the built-in
// table alone.
func loadPrices(file string) (*pricing.Table, error) {
	if file == "" {
		return pricing.Builtin(), nil
	}
	table, err := pricing.Load(file)
	if err != nil {
		return nil, fmt.Errorf("--prices: %w", err)
	}
	return table, nil
}

// bindGenkitProjects adds --genkit-project, which attaches to the Genkit apps of a project.
func bindGenkitProjects(cmd *cobra.Command, projects *[]string) {
	cmd.Flags().StringArrayVar(projects, "genkit-project", nil,
		"a Genkit project's root (where its package.json or go.mod is): list and run the actions of the apps running there, found through its .genkit/runtimes/ (repeatable)")
}

// absPaths makes each path absolute, leaving out duplicates.
func absPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if abs, err := filepath.Abs(p); err == nil && !slices.Contains(out, abs) {
			out = append(out, abs)
		}
	}
	return out
}

type serveOptions struct {
	addr      string
	dev       bool
	migrate   bool
	bodyLimit int64
	engine    engineOptions
	// ready, when set, is called once the server listens, with its address and the database's URL.
	ready func(addr, databaseURL string)
	// genkitProjects are project roots whose .genkit/runtimes/ are watched for Genkit apps, whose
	// actions this server then lists and runs (internal/genkitapp).
	genkitProjects []string
	// policyFile is the approval policy's file: stored as a new version whenever it changes.
	policyFile string
	// prices prices runs by the models they call (--prices over the built-in table).
	prices *pricing.Table
}

func serve(ctx context.Context, cfg *config, opts serveOptions) error {
	cfg.mayCreate = true
	log, err := cfg.logger()
	if err != nil {
		return err
	}
	if opts.dev {
		// Refuse before starting anything.
		if err := server.CheckLoopback(opts.addr); err != nil {
			return err
		}
	}
	tuneGC()
	if err := startProfiler(ctx, log); err != nil {
		return err
	}
	st, err := newStack(ctx, cfg, opts, log)
	if err != nil {
		return err
	}
	defer st.Stop()
	if err := st.srv.Start(ctx); err != nil {
		return err
	}
	if err := st.svcs.StartApps(ctx, "http://"+st.srv.Addr()); err != nil {
		return err
	}
	if opts.ready != nil {
		opts.ready(st.srv.Addr(), st.db.url)
	}
	err = st.db.wait(ctx)
	if err != nil {
		log.Error("shutting down: the database cannot be restarted", "err", err)
	} else {
		log.Info("shutting down")
	}
	st.srv.Stop()
	return err
}

// stack is everything a serving process runs: the database, the services (internal/services:
// the live hub, tracing, the run service, the Genkit app manager) and the server, started in
// order and stopped in reverse. serve listens with it; a program that mounts Loupe in its own
// HTTP server (devui.Handler) serves st.srv.Handler() itself.
type stack struct {
	db    *database
	svcs  *services.Services
	srv   *server.Server
	stops []func()
}

func newStack(ctx context.Context, cfg *config, opts serveOptions, log *slog.Logger) (_ *stack, err error) {
	st := &stack{}
	defer func() {
		if err != nil {
			st.Stop()
		}
	}()
	db, err := openDatabase(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	st.db = db
	st.stops = append(st.stops, db.close)
	if opts.migrate {
		if err := db.migrate(ctx, log); err != nil {
			return nil, err
		}
	}
	if !opts.dev {
		path, err := auth.New(store.New(db.pool)).Bootstrap(ctx, cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if path != "" {
			log.Warn("created the first admin; sign in as 'admin' with the password in the file, then change it on /account or with devui user passwd admin", "file", path)
		}
	}
	if opts.policyFile != "" {
		if err := watchPolicyFile(ctx, st, store.New(db.pool), opts.policyFile, log); err != nil {
			return nil, err
		}
	}
	tc, err := tracingConfigFromEnv()
	if err != nil {
		return nil, err
	}
	if opts.engine.publicURL == "" && os.Getenv("LOUPE_PUBLIC_URL") == "" && opts.addr != "" {
		opts.engine.publicURL = "http://" + opts.addr // the links in notifications
	}
	sc, err := servicesConfig(cfg.program, opts.engine, db.pool, log)
	if err != nil {
		return nil, err
	}
	sc.Ingest = &services.Ingest{IngestToken: tc.IngestToken, MaxBodyBytes: tc.MaxBody,
		Retention: trace.RetentionConfig{MaxAge: time.Duration(tc.RetentionDays) * 24 * time.Hour, MaxSpans: tc.MaxSpans,
			HourlyAbove: tc.HourlyAbove}}
	sc.GenkitProjects, sc.AppLeaseTTL = opts.genkitProjects, opts.engine.leaseTTL
	sc.ReadPool = db.reads
	sc.Experiments.Prices = opts.prices
	sc.DriveExperiments = opts.engine.workers > 0
	svcs, err := services.Start(ctx, sc)
	if err != nil {
		return nil, err
	}
	st.svcs = svcs
	st.stops = append(st.stops, svcs.Stop)
	if opts.dev {
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() { defer close(done); watchPrompts(wctx, sc.Registry, svcs.Runs, log) }()
		st.stops = append(st.stops, func() { cancel(); <-done })
	}
	deps := server.Deps{Store: svcs.Store, Reads: svcs.Reads, Runs: svcs.Runs, Traces: svcs.Traces, Live: svcs.Hub, Database: db.monitor(),
		Experiments: svcs.Experiments}
	if svcs.Apps != nil {
		deps.GenkitApps = svcs.Apps
	}
	srv, err := server.New(server.Config{
		Addr: opts.addr, Dev: opts.dev, Version: version, BodyLimit: opts.bodyLimit, Logger: log, PolicyFile: opts.policyFile,
		Prices: opts.prices,
	}, deps)
	if err != nil {
		return nil, err
	}
	st.srv = srv
	return st, nil
}

// Stop stops what newStack started, the last first. It is safe to call twice.
func (st *stack) Stop() {
	for i := len(st.stops) - 1; i >= 0; i-- {
		st.stops[i]()
	}
	st.stops = nil
}

func newMigrateCommand(cfg *config) *cobra.Command {
	var down bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations (or roll back the newest with --down)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDatabase(cmd.Context(), cfg, !down, func(db *database, _ *slog.Logger) error {
				if down {
					if err := store.MigrateDown(cmd.Context(), db.pool); err != nil {
						return err
					}
				}
				status, err := store.Migrations(cmd.Context(), db.pool)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "schema at migration %d (latest %d)\n", status.Current, status.Latest)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&down, "down", false, "roll back the newest migration")
	return cmd
}

func newDBCommand(cfg *config) *cobra.Command {
	cmd := groupCommand("db", "Manage the embedded PostgreSQL cluster for scripts: start, stop, url")
	cluster := func() (*pgcluster.Cluster, error) {
		log, err := cfg.logger()
		if err != nil {
			return nil, err
		}
		dir, err := cfg.dataDir()
		if err != nil {
			return nil, err
		}
		return pgcluster.New(pgcluster.Config{DataDir: dir, Logger: log})
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "start",
		Short: "Start the cluster in the background (or reuse it) and print its URL",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.mayCreate = true
			c, err := cluster()
			if err != nil {
				return err
			}
			if err := c.StartDetached(cmd.Context()); err != nil {
				return err
			}
			url, _ := c.Running()
			fmt.Fprintln(cmd.OutOrStdout(), url)
			return nil
		},
	}, &cobra.Command{
		Use:   "stop",
		Short: "Stop the cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cluster()
			if err != nil {
				return err
			}
			return c.StopDetached(cmd.Context())
		},
	}, &cobra.Command{
		Use:   "url",
		Short: "Print the URL of the running cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cluster()
			if err != nil {
				return err
			}
			url, ok := c.Running()
			if !ok {
				return errors.New("the embedded cluster is not running; start it with: devui db start")
			}
			fmt.Fprintln(cmd.OutOrStdout(), url)
			return nil
		},
	})
	return cmd
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the program's version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), cmd.Root().Name(), version)
		},
	}
}
