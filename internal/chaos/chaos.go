package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// chaosCounts are what happened to the processes.
type chaosCounts struct {
	kills           map[string]int // SIGKILLs the harness sent: worker, serve, postmaster
	faults          map[string]int // deaths at a fault point, by role
	otherExits      map[string]int // other exits, by role (a start while the database was down, say)
	pauses          int
	pausedMidTool   int // pauses that stopped a worker just after one of its tools started
	pausedTakenOver int // runs of paused workers that another execution took over meanwhile
}

// chaosStats counts them as they happen.
type chaosStats struct {
	mu sync.Mutex
	c  chaosCounts
}

func newChaosStats() *chaosStats {
	return &chaosStats{c: chaosCounts{kills: map[string]int{}, faults: map[string]int{}, otherExits: map[string]int{}}}
}

func (s *chaosStats) add(f func(c *chaosCounts)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.c)
}

func (s *chaosStats) snapshot() chaosCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.c
	c.kills, c.faults, c.otherExits = maps.Clone(c.kills), maps.Clone(c.faults), maps.Clone(c.otherExits)
	return c
}

// chaos kills and pauses the processes at random moments.
type chaos struct {
	rng     *rand.Rand
	log     *slog.Logger
	pool    *pgxpool.Pool
	cluster *cluster
	serve   *process
	workers []*process
	pause   [2]time.Duration // how long a paused worker stays stopped: from, to
	mix     []event          // the random events to pick from, evenly
	stats   *chaosStats
	effects string // the effects log
}

// event is one chaos action.
type event string

const (
	killWorker     event = "kill-worker"
	pauseWorker    event = "pause-worker"
	killServe      event = "kill-serve"
	killPostmaster event = "kill-postmaster"
)

// parseMix reads -mix: events separated by commas, repeated to weigh them.
func parseMix(s string) ([]event, error) {
	var mix []event
	for name := range strings.SplitSeq(s, ",") {
		switch ev := event(strings.TrimSpace(name)); ev {
		case killWorker, pauseWorker, killServe, killPostmaster:
			mix = append(mix, ev)
		default:
			return nil, fmt.Errorf("-mix: unknown event %q (kill-worker, pause-worker, kill-serve, kill-postmaster)", name)
		}
	}
	if len(mix) == 0 {
		return nil, fmt.Errorf("-mix: no event")
	}
	return mix, nil
}

// run acts for d: first one of each kind of event in a random order (the postmaster's only when
// asked), then random ones, a random 0.5–2.5 s apart.
func (c *chaos) run(ctx context.Context, d time.Duration, postmaster bool) {
	end := time.Now().Add(d)
	plan := []event{killWorker, pauseWorker, killServe}
	if postmaster {
		plan = append(plan, killPostmaster)
	}
	c.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	for time.Now().Before(end) {
		if !sleepCtx(ctx, time.Duration(500+c.rng.IntN(2000))*time.Millisecond) {
			return
		}
		var ev event
		if len(plan) > 0 {
			ev, plan = plan[0], plan[1:]
		} else {
			ev = c.mix[c.rng.IntN(len(c.mix))]
		}
		c.act(ctx, ev)
	}
}

func (c *chaos) act(ctx context.Context, ev event) {
	switch ev {
	case killWorker:
		w := c.busiest(ctx)
		if pid, ok := w.kill(); ok {
			c.stats.add(func(s *chaosCounts) { s.kills["worker"]++ })
			c.log.Info("killed a worker", "process", w.name, "pid", pid)
		}
	case pauseWorker:
		c.pauseWorker(ctx, c.busiest(ctx))
	case killServe:
		if pid, ok := c.serve.kill(); ok {
			c.stats.add(func(s *chaosCounts) { s.kills["serve"]++ })
			c.log.Info("killed the serve", "pid", pid)
		}
	case killPostmaster:
		c.stats.add(func(s *chaosCounts) { s.kills["postmaster"]++ })
		if err := c.cluster.killPostmaster(ctx, c.log); err != nil {
			c.log.Error("postmaster", "err", err)
		}
	}
}

// busiest returns the worker that holds the most runs (a random one on a tie), so that a kill or
// a pause lands on runs in flight.
func (c *chaos) busiest(ctx context.Context) *process {
	var best *process
	most := -1
	for _, i := range c.rng.Perm(len(c.workers)) {
		w := c.workers[i]
		pid, ok := w.running()
		if !ok {
			continue
		}
		if held, err := heldBy(ctx, c.pool, pid); err == nil && len(held) > most {
			best, most = w, len(held)
		}
	}
	if best == nil {
		return c.workers[c.rng.IntN(len(c.workers))] // none is up: the kill or pause does nothing
	}
	return best
}

// pauseWorker stops a worker for longer than the lease TTL, so that its runs are taken over, and
// lets it go on. It stops it just after one of its tools started, when it can, so that the tool's
// result arrives after the takeover, and so that its other tools of that turn may be between their
// lease check and their first act (a late act, which checkEffects tells from a dispatch after
// the takeover by the admission each start carries).
func (c *chaos) pauseWorker(ctx context.Context, w *process) {
	pid, ok := w.running()
	if !ok {
		return
	}
	midTool := c.waitToolStart(ctx, pid, 2*time.Second)
	if !w.pause(pid) {
		return
	}
	held, err := heldBy(ctx, c.pool, pid)
	if err != nil {
		w.resume(pid)
		return
	}
	d := c.pause[0] + time.Duration(c.rng.Int64N(int64(c.pause[1]-c.pause[0])+1))
	c.stats.add(func(s *chaosCounts) {
		s.pauses++
		if midTool {
			s.pausedMidTool++
		}
	})
	c.log.Info("paused a worker", "process", w.name, "pid", pid, "for", d, "runs", len(held), "mid_tool", midTool)
	sleepCtx(ctx, d)
	w.resume(pid)
	after, err := epochsElsewhere(ctx, c.pool, keys(held), pid)
	if err != nil {
		return
	}
	takenOver := 0
	for id, e := range after {
		if e > held[id] {
			takenOver++
		}
	}
	c.stats.add(func(s *chaosCounts) { s.pausedTakenOver += takenOver })
	sleepCtx(ctx, time.Second)
}

// waitToolStart follows the effects log until a tool of pid starts, for up to max, and reports
// whether one did.
func (c *chaos) waitToolStart(ctx context.Context, pid int, max time.Duration) bool {
	f, err := os.Open(c.effects)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return false
	}
	var buf []byte
	chunk := make([]byte, 64<<10)
	for deadline := time.Now().Add(max); time.Now().Before(deadline); {
		n, _ := f.Read(chunk)
		if n == 0 {
			if !sleepCtx(ctx, 2*time.Millisecond) {
				return false
			}
			continue
		}
		buf = append(buf, chunk[:n]...)
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			var l effectLine
			err := json.Unmarshal(buf[:i], &l)
			buf = buf[i+1:]
			if err == nil && l.Event == "start" && l.PID == pid {
				return true
			}
		}
	}
	return false
}

// heldBy returns the running runs whose lease the worker with pid holds, with their epochs.
func heldBy(ctx context.Context, pool *pgxpool.Pool, pid int) (map[string]int64, error) {
	rows, err := pool.Query(ctx, `SELECT id::text, lease_epoch FROM runs
		WHERE status = 'running' AND lease_owner ~ $1`, ownerPattern(pid))
	if err != nil {
		return nil, err
	}
	return collectEpochs(rows)
}

// epochsElsewhere returns the epochs of the runs ids that the worker with pid does not hold: an
// acquisition it sent just before it was paused may still have landed.
func epochsElsewhere(ctx context.Context, pool *pgxpool.Pool, ids []string, pid int) (map[string]int64, error) {
	rows, err := pool.Query(ctx, `SELECT id::text, lease_epoch FROM runs WHERE id::text = ANY($1)
		AND (lease_owner IS NULL OR lease_owner !~ $2)`, ids, ownerPattern(pid))
	if err != nil {
		return nil, err
	}
	return collectEpochs(rows)
}

// ownerPattern matches the lease owners of the process pid: "<host>-<pid>-<random hex>".
func ownerPattern(pid int) string { return "-" + strconv.Itoa(pid) + "-[0-9a-f]+$" }

func collectEpochs(rows pgx.Rows) (map[string]int64, error) {
	type idEpoch struct {
		ID    string
		Epoch int64
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[idEpoch])
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(list))
	for _, r := range list {
		out[r.ID] = r.Epoch
	}
	return out, nil
}

func keys(m map[string]int64) []string { return slices.Collect(maps.Keys(m)) }

// takeovers measures, for each run a SIGKILLed worker held, the time from the kill until another
// execution acquired the run (a higher lease epoch) or it was final.
type takeovers struct {
	pool    *pgxpool.Pool
	cluster *cluster
	workers []*process
	bound   time.Duration // the lease TTL plus the sweep interval, for the report
	log     *slog.Logger

	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []sample
	skipped int // samples left out: the postmaster was down meanwhile, or the runs were unreadable
	lost    []string
}

// sample is one run's takeover time; helped says another worker was up (alive, not paused) from
// the kill to the takeover, so that the lease and the sweep alone bound it.
type sample struct {
	d      time.Duration
	helped bool
}

// measure starts measuring the runs that dead, the worker with pid, held.
func (t *takeovers) measure(dead *process, pid int, at time.Time) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		held, err := heldBy(ctx, t.pool, pid)
		if err != nil {
			t.skip()
			return
		}
		for len(held) > 0 && sleepCtx(ctx, 10*time.Millisecond) {
			rows, err := t.pool.Query(ctx, `SELECT id::text, lease_epoch, status FROM runs WHERE id::text = ANY($1)`, keys(held))
			if err != nil {
				continue
			}
			type state struct {
				ID     string
				Epoch  int64
				Status string
			}
			list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[state])
			if err != nil {
				continue
			}
			for _, r := range list {
				if r.Epoch > held[r.ID] || final(r.Status) {
					delete(held, r.ID)
					t.add(dead, r.ID, at, time.Now())
				}
			}
		}
		t.mu.Lock()
		t.lost = append(t.lost, keys(held)...)
		t.mu.Unlock()
	}()
}

func (t *takeovers) add(dead *process, run string, from, to time.Time) {
	if t.cluster.downDuring(from, to) {
		t.skip()
		return
	}
	helped := false
	for _, w := range t.workers {
		helped = helped || w != dead && w.upThroughout(from, to)
	}
	t.mu.Lock()
	t.samples = append(t.samples, sample{d: to.Sub(from), helped: helped})
	t.mu.Unlock()
	if helped && to.Sub(from) > t.bound {
		t.explain(run, from, to)
	}
}

// explain logs the River jobs of a run whose takeover took longer than the bound although another
// worker was up: when each was created and attempted, relative to the kill.
func (t *takeovers) explain(run string, kill, done time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := t.pool.Query(ctx, `SELECT id, state::text, attempt, created_at, attempted_at, scheduled_at,
			coalesce(array_to_string(attempted_by, ','), '')
		FROM river_job WHERE kind = 'loupe.run' AND args->>'run_id' = $1 ORDER BY id`, run)
	if err != nil {
		return
	}
	type job struct {
		ID        int64
		State     string
		Attempt   int
		Created   time.Time
		Attempted *time.Time
		Scheduled time.Time
		By        string
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[job])
	if err != nil {
		return
	}
	rel := func(at time.Time) string { return at.Sub(kill).Round(time.Millisecond).String() }
	var parts []string
	for _, j := range jobs {
		attempted := "never"
		if j.Attempted != nil {
			attempted = rel(*j.Attempted)
		}
		parts = append(parts, fmt.Sprintf("job %d %s attempt %d created %s scheduled %s attempted %s by %s",
			j.ID, j.State, j.Attempt, rel(j.Created), rel(j.Scheduled), attempted, j.By))
	}
	t.log.Info("slow takeover", "run", run, "took", done.Sub(kill).Round(time.Millisecond), "jobs", strings.Join(parts, "; "))
}

func (t *takeovers) skip() {
	t.mu.Lock()
	t.skipped++
	t.mu.Unlock()
}

// report waits for the measurements under way and sums them up.
func (t *takeovers) report() string {
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	var all, helped []time.Duration
	over, worst := 0, time.Duration(0)
	for _, s := range t.samples {
		all = append(all, s.d)
		if s.helped {
			helped = append(helped, s.d)
			if s.d > t.bound {
				over, worst = over+1, max(worst, s.d-t.bound)
			}
		}
	}
	out := fmt.Sprintf("%s over %d runs of killed workers (%d left out: the postmaster was down meanwhile)", quantiles(all), len(all), t.skipped)
	out += fmt.Sprintf("\n                  %s over the %d with another worker up throughout; %d of them over TTL + sweep = %s",
		quantiles(helped), len(helped), over, t.bound)
	if over > 0 {
		out += fmt.Sprintf(", by at most %s", worst.Round(time.Millisecond))
	}
	if len(t.lost) > 0 {
		out += fmt.Sprintf("\n                  %d never taken over within 90s: %v", len(t.lost), t.lost)
	}
	return out
}

func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("p50 %s, max %s", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

func final(status string) bool {
	switch status {
	case "succeeded", "failed", "aborted", "cancelled":
		return true
	}
	return false
}
