// Command chaos is Loupe's crash harness (make chaos, make chaos-short). It builds devui, starts a
// PostgreSQL cluster, one devui serve (the API, executing nothing) and two devui workers on it, and
// drives a workload of demo runs and reviewer decisions through the JSON API while it SIGKILLs
// workers, the serve and the postmaster, pauses workers past their lease, and lets the processes
// kill themselves at fault points (LOUPE_FAULTS). After each round it lets the runs settle and
// checks from the database and the demo tools' effects log that durability held: every run is
// finished or waits for a reviewer, none failed, no completed tool call was dispatched again, no
// execution dispatched a call twice, no tool was admitted by an execution that had lost its run
// or acted before its execution's intent was committed, nothing was written into a finished run,
// every interrupted tool call has its interrupt, every run and decision the API acknowledged is
// in the database with its effect, the effects log has no torn line, and every run's outcome,
// token totals, output, tool calls and history equal its clean run's. It exits 1 on any
// violation.
//
//	go run ./internal/chaos -rounds 5 -runs-per-round 16 -seed 42
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// options are the harness's flags.
type options struct {
	rounds, runsPerRound int
	seed                 uint64
	roundTime            time.Duration
	settle, grace        time.Duration
	leaseTTL, toolDelay  time.Duration
	pause                time.Duration
	postmasterEvery      int
	workers              int
	workerFaults         string
	serveFaults          string
	mix                  string
	devui                string
	keep, verbose        bool
}

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 5, "rounds of workload and chaos")
	flag.IntVar(&o.runsPerRound, "runs-per-round", 16, "runs started in each round")
	flag.Uint64Var(&o.seed, "seed", 0, "seed of the harness's choices (inputs, decisions, chaos); 0 picks one")
	flag.DurationVar(&o.roundTime, "round-time", 12*time.Second, "how long the chaos of a round lasts")
	flag.DurationVar(&o.settle, "settle", 60*time.Second, "how long runs may take to finish after a round's chaos, the reviewer still at work")
	flag.DurationVar(&o.grace, "grace", 10*time.Second, "then how long, the reviewer stopped, a queued or running run may take to stop being so")
	flag.DurationVar(&o.leaseTTL, "lease-ttl", 2*time.Second, "LOUPE_LEASE_TTL of the processes")
	flag.DurationVar(&o.toolDelay, "tool-delay", 30*time.Millisecond, "LOUPE_DEMO_TOOL_DELAY: how long each demo tool acts")
	flag.DurationVar(&o.pause, "pause", 3*time.Second, "a paused worker stays stopped from this to 2s longer (longer than -lease-ttl)")
	flag.IntVar(&o.postmasterEvery, "postmaster-every", 3, "kill the postmaster in every n-th round (0: never)")
	flag.IntVar(&o.workers, "workers", 2, "devui worker processes")
	flag.StringVar(&o.workerFaults, "worker-faults", "after-fetch=0.02,mid-model=0.02,mid-tool=0.02,interrupted-checkpoint=0.05", "LOUPE_FAULTS of the workers")
	flag.StringVar(&o.serveFaults, "serve-faults", "after-resolve=0.05", "LOUPE_FAULTS of the serve")
	flag.StringVar(&o.mix, "mix", "kill-worker,kill-worker,pause-worker,kill-serve", "the random events after each round's first of each kind, picked evenly from this list")
	flag.StringVar(&o.devui, "devui", "", "a devui binary to use instead of building ./cmd/devui")
	flag.BoolVar(&o.keep, "keep", false, "keep the temp dir (data, logs, effects log); it is kept anyway on a violation")
	flag.BoolVar(&o.verbose, "v", false, "log every kill, pause, restart and slow takeover")
	flag.Parse()
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	os.Exit(runMain(o))
}

// runMain runs the harness under a signal-aware context and returns the exit code, so that the
// context's deferred stop runs before main exits.
func runMain(o options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	return code
}

// harness is everything a run of the harness holds.
type harness struct {
	o       options
	rng     *rand.Rand // the workload's
	log     *slog.Logger
	dir     string
	cluster *cluster
	pool    *pgxpool.Pool
	work    *workload
	serve   *process
	workers []*process
	stats   *chaosStats
	checks  *checker
	takes   *takeovers
	chaos   *chaos
}

// run returns the exit code: 0 when every invariant held, 1 on a violation.
func run(ctx context.Context, o options) (int, error) {
	// The workload and the chaos draw from their own sources, each seeded, so each goroutine
	// has one; the processes' fault points and timing are not reproducible anyway.
	h := &harness{o: o, rng: rand.New(rand.NewPCG(o.seed, 1)), stats: newChaosStats()}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelInfo
	}
	h.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	dir, err := os.MkdirTemp("", "loupe-chaos-")
	if err != nil {
		return 0, err
	}
	// As root, devui runs PostgreSQL as an unprivileged user, which must traverse the temp dir.
	if err := os.Chmod(dir, 0o711); err != nil {
		return 0, err
	}
	h.dir = dir
	code, err := h.run(ctx)
	h.shutdown()
	if code == 0 && err == nil && !o.keep {
		if err := os.RemoveAll(dir); err != nil {
			h.log.Warn("remove the temp dir", "dir", dir, "err", err)
		}
	} else {
		fmt.Printf("\nkept %s (logs, effects.log; inspect the database with: devui db start --data-dir %s)\n", dir, filepath.Join(dir, "data"))
	}
	return code, err
}

func (h *harness) run(ctx context.Context) (int, error) {
	o := h.o
	bound := (o.leaseTTL + o.leaseTTL/3).Round(time.Millisecond)
	fmt.Printf("chaos: seed %d, %d rounds of %d runs, %d workers, lease TTL %s (a run is taken over at most TTL + TTL/3 = %s after its executor stopped)\n",
		o.seed, o.rounds, o.runsPerRound, o.workers, o.leaseTTL, bound)
	fmt.Printf("chaos: settle bound %s with the reviewer at work, then %s more for queued and running runs\n", o.settle, o.grace)
	devui := o.devui
	if devui == "" {
		fmt.Println("chaos: building devui")
		var err error
		if devui, err = buildDevui(ctx, h.dir); err != nil {
			return 0, err
		}
	}
	var err error
	if h.cluster, err = newCluster(devui, filepath.Join(h.dir, "data")); err != nil {
		return 0, err
	}
	if err := h.cluster.start(ctx); err != nil {
		return 0, err
	}
	cfg, err := pgxpool.ParseConfig(h.cluster.url)
	if err != nil {
		return 0, err
	}
	cfg.HealthCheckPeriod = time.Second
	if h.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return 0, err
	}
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	h.work = newWorkload("http://127.0.0.1:" + strconv.Itoa(port))
	h.checks = newChecker(h.pool, filepath.Join(h.dir, "effects.log"), 5*time.Millisecond)
	h.checks.acks = h.work.acks
	// The README's bound for a dead worker's job to leave running (twice the lease TTL and a
	// sweep, which is TTL/3), and one sweep more for a sweep under way when the bound passed.
	h.checks.jobBound = 2*o.leaseTTL + 2*(o.leaseTTL/3)
	h.checks.lastOutageEnd = h.cluster.lastOutageEnd
	h.takes = &takeovers{pool: h.pool, cluster: h.cluster, bound: bound, log: h.log}
	h.serve = h.process(devui, "serve", "serve", []string{"serve", "--dev", "--addr", "127.0.0.1:" + strconv.Itoa(port), "--workers", "0"})
	for i := range o.workers {
		h.workers = append(h.workers, h.process(devui, fmt.Sprintf("worker-%d", i+1), "worker", []string{"worker"}))
	}
	h.takes.workers = h.workers
	mix, err := parseMix(o.mix)
	if err != nil {
		return 0, err
	}
	h.chaos = &chaos{rng: rand.New(rand.NewPCG(o.seed, 2)), log: h.log, pool: h.pool, cluster: h.cluster, serve: h.serve, workers: h.workers,
		pause: [2]time.Duration{o.pause, o.pause + 2*time.Second}, mix: mix, stats: h.stats, effects: h.checks.effects}
	go h.work.review(ctx)

	// The clean runs: no faults, no chaos.
	all, err := h.baseline(ctx)
	if err != nil {
		return 0, err
	}
	var last *report
	for round := 1; round <= o.rounds; round++ {
		if last, err = h.round(ctx, round); err != nil {
			return 0, err
		}
		all = append(all, last.fresh...)
	}
	h.work.reviews.Store(false)
	if all = h.summary(last, all); len(all) > 0 {
		return 1, nil
	}
	return 0, nil
}

// process prepares a supervised devui process; it starts with start.
func (h *harness) process(devui, name, role string, args []string) *process {
	p := &process{name: name, role: role, bin: devui, args: args, logPath: filepath.Join(h.dir, name+".log")}
	p.restartDelay = func() time.Duration {
		if role == "worker" && rand.IntN(2) == 0 {
			return time.Duration(200+rand.IntN(1800)) * time.Millisecond // a short random pause
		}
		return 0 // at once
	}
	p.onExit = func(p *process, pid int, kind exitKind, status string, at time.Time) {
		switch kind {
		case exitFault:
			h.stats.add(func(c *chaosCounts) { c.faults[p.role]++ })
		case exitOther:
			h.stats.add(func(c *chaosCounts) { c.otherExits[p.role]++ })
		}
		if p.role == "worker" && kind != exitOther {
			h.takes.measure(p, pid, at)
		}
		h.log.Info("process died; starting it again", "process", p.name, "pid", pid, "how", status)
	}
	return p
}

// setEnv gives the processes their environment: the database, the short lease, the effects log,
// slow tools, and the fault points when faults is set.
func (h *harness) setEnv(faults bool) {
	common := []string{
		"DATABASE_URL=" + h.cluster.url,
		"LOUPE_DATA_DIR=" + filepath.Join(h.dir, "devui"),
		"LOUPE_LEASE_TTL=" + h.o.leaseTTL.String(),
		"LOUPE_DEMO_EFFECTS_LOG=" + h.checks.effects,
		"LOUPE_DEMO_TOOL_DELAY=" + h.o.toolDelay.String(),
		"LOG_FORMAT=json",
		"OPENAI_BASE_URL=", "OPENAI_API_KEY=",
	}
	serveFaults, workerFaults := "", ""
	if faults {
		serveFaults, workerFaults = h.o.serveFaults, h.o.workerFaults
	}
	h.serve.env = append(slices.Clone(common), "LOUPE_FAULTS="+serveFaults)
	for _, w := range h.workers {
		w.env = append(slices.Clone(common), "LOUPE_FAULTS="+workerFaults)
	}
}

// startProcesses starts the serve (which migrates the database), waits until it is ready, and
// starts the workers.
func (h *harness) startProcesses(ctx context.Context, faults bool) error {
	h.setEnv(faults)
	h.serve.supervise(h.log)
	if err := h.work.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	for _, w := range h.workers {
		w.supervise(h.log)
	}
	return nil
}

func (h *harness) stopProcesses() {
	for _, p := range append([]*process{h.serve}, h.workers...) {
		p.stop()
	}
}

// baseline runs each input once cleanly, with each decision for those that stop for a reviewer,
// without faults or chaos, and keeps their outcomes and token totals as the reference.
func (h *harness) baseline(ctx context.Context) ([]violation, error) {
	if err := h.startProcesses(ctx, false); err != nil {
		return nil, err
	}
	if err := h.checks.instrument(ctx); err != nil {
		return nil, err
	}
	var ids []string
	for _, in := range inputs {
		plans := []string{planApprove}
		if in.interrupts {
			plans = append(plans, planDeny)
		}
		for _, plan := range plans {
			id, err := h.work.start(ctx, in, plan)
			if err != nil {
				return nil, fmt.Errorf("clean run: %w", err)
			}
			ids = append(ids, id)
		}
	}
	h.work.reviews.Store(true)
	took, ok, err := h.settle(ctx)
	if err != nil {
		return nil, err
	}
	vs, err := h.checks.recordBaseline(ctx, ids)
	if err != nil {
		return nil, err
	}
	fmt.Printf("clean runs: %d, settled in %s", len(ids), took.Round(100*time.Millisecond))
	if !ok {
		fmt.Print(" (not within the bound)")
	}
	fmt.Println()
	for _, v := range vs {
		fmt.Println("  VIOLATION", v)
	}
	// From here on, with faults.
	h.stopProcesses()
	if err := h.startProcesses(ctx, true); err != nil {
		return nil, err
	}
	return vs, nil
}

// round starts the round's runs while the chaos acts, lets the runs settle and checks.
func (h *harness) round(ctx context.Context, n int) (*report, error) {
	before := h.stats.snapshot()
	h.work.reviews.Store(true)
	startsDone := make(chan int, 1)
	go func() {
		// In bursts of up to four, over the first two thirds of the round, so that the chaos
		// finds runs in flight.
		started := 0
		bursts := (h.o.runsPerRound + 3) / 4
		for i := range h.o.runsPerRound {
			in := inputs[h.rng.IntN(len(inputs))]
			if _, err := h.work.start(ctx, in, pickPlan(h.rng, in)); err == nil {
				started++
			}
			if i%4 == 3 {
				sleepCtx(ctx, h.o.roundTime*2/3/time.Duration(bursts))
			}
		}
		startsDone <- started
	}()
	postmaster := h.o.postmasterEvery > 0 && n%h.o.postmasterEvery == 0
	h.chaos.run(ctx, h.o.roundTime, postmaster)
	started := <-startsDone
	took, ok, err := h.settle(ctx)
	if err != nil {
		return nil, err
	}
	h.work.reviews.Store(false)
	if n == h.o.rounds {
		// The jobs of the runs that settled last are checked too (checkJobs looks at a job only
		// once its bound has passed); earlier rounds' are checked by the next round's check.
		sleepCtx(ctx, h.checks.jobBound)
	}
	r, err := h.checks.check(ctx)
	if err != nil {
		return nil, err
	}
	after := h.stats.snapshot()
	fmt.Printf("round %d/%d: %d runs started; chaos %s: worker kills %d, pauses %d, serve kills %d, postmaster kills %d; faults fired %d; settled in %s",
		n, h.o.rounds, started, h.o.roundTime,
		after.kills["worker"]-before.kills["worker"], after.pauses-before.pauses,
		after.kills["serve"]-before.kills["serve"], after.kills["postmaster"]-before.kills["postmaster"],
		sum(after.faults)-sum(before.faults), took.Round(100*time.Millisecond))
	if !ok {
		fmt.Print(" (NOT within the bound)")
	}
	fmt.Println()
	fmt.Printf("  runs %d (%s) · tool executions %d (re-executed %d, late acts %d) · superseded results %d · new violations %d\n",
		r.runs, statusLine(r.byStatus), r.executions, r.reexecutions, r.lateActs, r.superseded, len(r.fresh))
	fmt.Printf("  acknowledged %d runs, %d decisions · effects log: %d torn lines, %d line being written\n",
		r.ackedRuns, r.ackedDecisions, r.tornLines, r.tornTail)
	sortViolations(r.fresh)
	for _, v := range r.fresh {
		fmt.Println("  VIOLATION", v)
	}
	return r, nil
}

// settle waits until every run is finished or waits for a reviewer who will not come (a run the
// plan leaves pending), the reviewer still at work, for up to -settle; then, the reviewer
// stopped, up to -grace more until no run is queued or running. It reports how long it took and
// whether the runs settled within the first bound.
func (h *harness) settle(ctx context.Context) (time.Duration, bool, error) {
	start := time.Now()
	for time.Since(start) < h.o.settle {
		done, err := h.settled(ctx, true)
		if err == nil && done {
			return time.Since(start), true, nil
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return 0, false, ctx.Err()
		}
	}
	h.work.reviews.Store(false)
	graceEnd := time.Now().Add(h.o.grace)
	for time.Now().Before(graceEnd) {
		if done, err := h.settled(ctx, false); err == nil && done {
			break
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return 0, false, ctx.Err()
		}
	}
	return time.Since(start), false, nil
}

// settled reports whether no run is queued or running, and, when all is set, whether every
// interrupted run is one the reviewer leaves pending.
func (h *harness) settled(ctx context.Context, all bool) (bool, error) {
	rows, err := h.pool.Query(ctx, `SELECT id::text, status FROM runs WHERE status IN ('queued', 'running', 'interrupted')`)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			return false, err
		}
		if status != "interrupted" || all && h.work.planOf(id) != planLeave {
			return false, nil
		}
	}
	return true, rows.Err()
}

// summary prints the totals: last is the last round's check, all the violations so far. It
// returns them with those found in the processes' logs (panics).
func (h *harness) summary(last *report, all []violation) []violation {
	c := h.stats.snapshot()
	faults := map[string]int{}
	for _, p := range append([]*process{h.serve}, h.workers...) {
		if err := faultLines(p.logPath, faults); err != nil {
			fmt.Println("chaos: read", p.logPath, err)
		}
		lines, err := panics(p.logPath)
		if err != nil {
			fmt.Println("chaos: read", p.logPath, err)
		}
		for _, l := range lines {
			all = append(all, violation{"process panicked", "-", l, p.name + ": " + l})
		}
	}
	w := h.work.snapshot()
	fmt.Println("\nsummary")
	fmt.Printf("  rounds          %d (seed %d)\n", h.o.rounds, h.o.seed)
	fmt.Printf("  kills           worker %d, serve %d, postmaster %d (by the harness)\n", c.kills["worker"], c.kills["serve"], c.kills["postmaster"])
	fmt.Printf("  pauses          %d (%d just after a tool started; runs taken over while paused: %d)\n", c.pauses, c.pausedMidTool, c.pausedTakenOver)
	fmt.Printf("  faults fired    %d exits (worker %d, serve %d); by point: %s\n", sum(c.faults), c.faults["worker"], c.faults["serve"], countLine(faults))
	fmt.Printf("  other exits     worker %d, serve %d (a start while the database was down, say)\n", c.otherExits["worker"], c.otherExits["serve"])
	fmt.Printf("  requests        %d runs started (%d retries), %d approved, %d denied, %d conflicts, %d failed resolves\n",
		w.started, w.startRetries, w.approved, w.denied, w.conflicts, w.resolveErrors)
	if last != nil {
		fmt.Printf("  runs            %d (%s)\n", last.runs, statusLine(last.byStatus))
		fmt.Printf("  tool executions %d, re-executions %d (in flight at a crash), superseded results %d (%d after the run finished)\n",
			last.executions, last.reexecutions, last.superseded, last.supersededLate)
		fmt.Printf("  late acts       %d (admitted before their execution lost the run, acting after another completed the call)\n", last.lateActs)
		fmt.Printf("  acknowledged    %d runs (201), %d decisions (200), each checked in the database with its effect\n", last.ackedRuns, last.ackedDecisions)
		fmt.Printf("  effects log     %d torn lines (violations), %d last line still being written when read\n", last.tornLines, last.tornTail)
	}
	fmt.Printf("  takeover        %s\n", h.takes.report())
	fmt.Printf("  violations      %d\n", len(all))
	sortViolations(all)
	for _, v := range all {
		fmt.Println("    ", v)
	}
	return all
}

func (h *harness) shutdown() {
	if h.serve != nil {
		h.stopProcesses()
	}
	if h.pool != nil {
		h.pool.Close()
	}
	if h.cluster != nil {
		h.cluster.stop()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func statusLine(m map[string]int) string {
	var parts []string
	for _, s := range []string{"succeeded", "interrupted", "queued", "running", "failed", "aborted", "cancelled"} {
		if m[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, m[s]))
		}
	}
	return strings.Join(parts, ", ")
}

func countLine(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
