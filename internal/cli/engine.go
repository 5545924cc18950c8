package cli

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/notify"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/services"
	"github.com/loupe-dev/loupe/internal/store"
)

// engineOptions configure the registry and the run service.
type engineOptions struct {
	noDemo   bool
	workers  int
	leaseTTL time.Duration
	// webhooks are --webhook's URLs; webhookSecretFile holds their HMAC secret; publicURL is the
	// UI's address for the links in notifications.
	webhooks          []string
	webhookSecretFile string
	publicURL         string
	// prompts is a directory of .prompt files (--prompts, LOUPE_PROMPTS).
	prompts string
}

func (o *engineOptions) bind(fs *pflag.FlagSet, defaultWorkers int) {
	fs.BoolVar(&o.noDemo, "no-demo", false, "do not register the demo agents")
	fs.IntVar(&o.workers, "workers", defaultWorkers, "runs this process executes at once (0: none, only start, resolve and cancel)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", defaultLeaseTTL(), "how long a run stays with a worker that stopped answering before another takes it over (env LOUPE_LEASE_TTL)")
	// The URLs and the secret are read from the environment when the command runs, never as a
	// flag's default: --help would print them.
	fs.StringArrayVar(&o.webhooks, "webhook", nil,
		"POST a signed JSON notification (Slack-compatible) to this URL on a new pending interrupt, an escalation and an expiry; repeatable (env LOUPE_WEBHOOK_URLS, comma-separated; HMAC secret in env LOUPE_WEBHOOK_SECRET or --webhook-secret-file; see README)")
	fs.StringVar(&o.webhookSecretFile, "webhook-secret-file", "", "file holding the webhooks' HMAC-SHA256 secret (env LOUPE_WEBHOOK_SECRET_FILE; or the secret itself in env LOUPE_WEBHOOK_SECRET)")
	fs.StringVar(&o.prompts, "prompts", os.Getenv("LOUPE_PROMPTS"),
		"a directory of Dotprompt (.prompt) files to load as /prompt/<name> actions, as Genkit's promptDir (env LOUPE_PROMPTS); serve --dev reloads a changed file without a restart")
	fs.StringVar(&o.publicURL, "public-url", "", "the UI's address as reviewers reach it, for the links in notifications (env LOUPE_PUBLIC_URL; serve defaults to http://ADDR)")
}

// webhooksConfig is the webhooks of --webhook or LOUPE_WEBHOOK_URLS, signed with the secret of
// --webhook-secret-file, LOUPE_WEBHOOK_SECRET_FILE or LOUPE_WEBHOOK_SECRET. Errors never quote the
// secret, and name a URL only redacted.
func webhooksConfig(o engineOptions) (notify.Config, error) {
	c := notify.Config{URLs: o.webhooks, BaseURL: cmp.Or(o.publicURL, os.Getenv("LOUPE_PUBLIC_URL"))}
	if len(c.URLs) == 0 {
		c.URLs = strings.FieldsFunc(os.Getenv("LOUPE_WEBHOOK_URLS"), func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	}
	if !c.Enabled() {
		return c, nil
	}
	if err := c.Check(); err != nil {
		return c, err
	}
	if file := cmp.Or(o.webhookSecretFile, os.Getenv("LOUPE_WEBHOOK_SECRET_FILE")); file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return c, fmt.Errorf("--webhook-secret-file: %w", err)
		}
		c.Secret = notify.Secret(bytes.TrimSpace(b))
		if len(c.Secret) == 0 {
			return c, fmt.Errorf("--webhook-secret-file %s is empty", file)
		}
	} else if v := os.Getenv("LOUPE_WEBHOOK_SECRET"); v != "" {
		c.Secret = notify.Secret(v)
	}
	return c, nil
}

// newRegistry is the program's registry, reporting its spans to tp, with the demo agents when
// the program has them and --no-demo was not given. The demo agents are registered once per
// process.
func newRegistry(p *Program, o engineOptions, tp oteltrace.TracerProvider, log *slog.Logger) (*engine.Registry, error) {
	if tp != nil {
		p.Registry.SetTracerProvider(tp)
	}
	if err := loadPrompts(p.Registry, o.prompts, log); err != nil {
		return nil, err
	}
	if p.Demo == nil || o.noDemo {
		return p.Registry, nil
	}
	p.demoOnce.Do(func() { p.demoErr = p.Demo(p.Registry, log) })
	if p.demoErr != nil {
		return nil, fmt.Errorf("register demo agents: %w", p.demoErr)
	}
	return p.Registry, nil
}

// servicesConfig is the services of program p (internal/services): its registry, with the demo
// agents unless --no-demo, and its run service, whose workers announce p's actions in the
// catalogue under p's name and work p's queue.
func servicesConfig(p *Program, o engineOptions, pool *pgxpool.Pool, log *slog.Logger) (services.Config, error) {
	reg, err := newRegistry(p, o, nil, log)
	if err != nil {
		return services.Config{}, err
	}
	rc, err := runsConfig(p, o, log)
	if err != nil {
		return services.Config{}, err
	}
	return services.Config{Pool: pool, Registry: reg, Runs: rc, Tracing: services.Tracing{ServiceVersion: version}, Logger: log}, nil
}

// runsConfig is the run service's configuration for program p.
func runsConfig(p *Program, o engineOptions, log *slog.Logger) (runs.Config, error) {
	// LOUPE_FAULTS is the crash harness's (make chaos): the process kills itself at fault points.
	faults, err := runs.ParseFaults(os.Getenv("LOUPE_FAULTS"))
	if err != nil {
		return runs.Config{}, fmt.Errorf("LOUPE_FAULTS: %w", err)
	}
	if len(faults) > 0 {
		log.Warn("fault injection is on: this process kills itself at fault points (LOUPE_FAULTS)", "faults", faults)
	}
	ttl := o.leaseTTL
	if ttl <= 0 {
		ttl = 15 * time.Second
	}
	hooks, err := webhooksConfig(o)
	if err != nil {
		return runs.Config{}, err
	}
	return runs.Config{Program: p.name(), Workers: o.workers, LeaseTTL: ttl, Faults: faults, Logger: log, Webhooks: hooks}, nil
}

// newExecutor builds what a process that executes runs needs without serving HTTP (devui worker,
// devui run --wait, devui eval run): the services without the trace service (Loupe's
// TracerProvider exporting to PostgreSQL, the registry on it, the run service, the experiment
// service, and a hub without WebSocket clients, which still sends its events to the other
// instances, so pages served by devui serve update live for runs executed here). With drive, it
// also drives the experiments no live process drives (devui worker). Stop stops them, flushing
// the spans after the runs.
func newExecutor(ctx context.Context, p *Program, o engineOptions, pool *pgxpool.Pool, log *slog.Logger, drive bool) (*services.Services, error) {
	sc, err := servicesConfig(p, o, pool, log)
	if err != nil {
		return nil, err
	}
	sc.DriveExperiments = drive
	return services.Start(ctx, sc)
}

// withExecutor opens the database (migrating it) and runs fn with an executing run service, for
// the commands that start runs and may follow them (devui run, devui replay). With no workers it
// only starts runs, for devui serve or devui worker to execute.
func withExecutor(cmd *cobra.Command, cfg *config, o engineOptions, fn func(*runs.Service, *store.Store) error) error {
	return withServices(cmd, cfg, o, func(svcs *services.Services) error { return fn(svcs.Runs, svcs.Store) })
}

// withServices is withExecutor for a command that needs more than the run service.
func withServices(cmd *cobra.Command, cfg *config, o engineOptions, fn func(*services.Services) error) error {
	ctx := cmd.Context()
	return withDatabase(ctx, cfg, true, func(db *database, log *slog.Logger) error {
		svcs, err := newExecutor(ctx, cfg.program, o, db.pool, log, false)
		if err != nil {
			return err
		}
		defer svcs.Stop()
		return fn(svcs)
	})
}

// defaultLeaseTTL is LOUPE_LEASE_TTL, or 15 seconds.
func defaultLeaseTTL() time.Duration {
	ttl, err := time.ParseDuration(envOr("LOUPE_LEASE_TTL", "15s"))
	if err != nil || ttl <= 0 {
		return 15 * time.Second
	}
	return ttl
}
