package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// exitDiverged is devui replay's exit code when a replay diverged from its original.
const exitDiverged = 4

// replayOptions are devui replay's flags.
type replayOptions struct {
	program          string // the program's name, for the hints it prints
	mode, tools      string
	turn             int
	wait, apply      bool
	model, system    string
	configJSON       string
	editsJSON        string
	maxTurns         int
	action, since    string
	limit            int
	eng              engineOptions
	changedFlags     func(name string) bool
	progressInterval time.Duration
}

func newReplayCommand(cfg *config) *cobra.Command {
	o := &replayOptions{progressInterval: 100 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "replay <run-id> [--mode exact|rerun|fork] [--turn N] [--wait] | replay --action X --since 24h [--mode exact]",
		Short: "Replay a stored run (exact playback, re-execution, or a fork from a turn), or every recent run of an action",
		Long: `Replay a stored run. Every mode creates a new run linked to the original, which is never modified.

  exact  plays the recorded model responses back and never calls a model, and serves the
         recorded tool outputs, so no tool acts twice (--tools live runs the tools again). The
         first model request or tool output that differs from the recording is the divergence.
  rerun  runs the same action and input against the live model, with optional --model,
         --system, --config and --max-turns overrides.
  fork   copies the history before --turn N as stored (optionally --edits), then goes on live.

A replayed run raises its interrupts again and offers the original decision as the default;
--apply-resolutions (exact only) applies the recorded decisions instead.

With --wait this process executes the replay and follows it; the exit code is 0 when it succeeded
without diverging, 4 when it diverged, 3 when it waits for a reviewer, 1 otherwise. An exact
replay diverges at the first model request, tool call, status or output that differs from the
recording; a re-run or a fork when its final status or output differs from the original's.

With --action instead of a run id, every original run of the action since --since (default 24h)
is replayed, exact by default, with a progress bar on stderr and a summary of the runs that
diverged: a regression test after changing a prompt or a tool. It exits with 4 when any diverged,
and with 1 when there was no run to replay or one could not be replayed.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.changedFlags = func(name string) bool { return cmd.Flags().Changed(name) }
			switch {
			case len(args) == 1 && o.action != "":
				return errors.New("give either a run id or --action, not both")
			case len(args) == 0 && o.action == "":
				return errors.New("give a run id to replay, or --action to replay every recent run of an action")
			}
			o.program = cfg.program.name()
			return withReplayService(cmd, cfg, o, func(svc *runs.Service, st *store.Store) error {
				if o.action != "" {
					return bulkReplay(cmd.Context(), svc, st, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
				}
				return replayOne(cmd.Context(), svc, st, o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.mode, "mode", store.ReplayExact, "exact, rerun or fork")
	fs.IntVar(&o.turn, "turn", 0, "fork: the turn to fork from (the turns before it are copied)")
	fs.StringVar(&o.tools, "tools", "", "exact: cassette (the default: serve the recorded tool outputs, so no tool acts twice) or live (run the tools again)")
	fs.BoolVar(&o.apply, "apply-resolutions", false, "exact: apply the original reviewers' decisions to the interrupts raised again")
	fs.StringVar(&o.model, "model", "", "rerun, fork: the model to use instead")
	fs.StringVar(&o.system, "system", "", "rerun: the system prompt to use instead")
	fs.StringVar(&o.configJSON, "config", "", "rerun, fork: the model config to use instead, as JSON")
	fs.IntVar(&o.maxTurns, "max-turns", 0, "rerun, fork: the turn limit to use instead")
	fs.StringVar(&o.editsJSON, "edits", "", `fork: edits of the copied history, as JSON: [{"seq":N,"message":{…}}] or [{"turn":N,"ref":"…","output":…}]`)
	fs.BoolVar(&o.wait, "wait", false, "execute the replay here and follow it until it ends")
	fs.StringVar(&o.action, "action", "", "replay every recent original run of this action instead of one run")
	fs.StringVar(&o.since, "since", "24h", "with --action: how far back, as a duration (24h) or an RFC 3339 time")
	fs.IntVar(&o.limit, "limit", 100, "with --action: at most this many runs")
	o.eng.bind(fs, 4)
	return cmd
}

// withReplayService opens the database and runs fn with a run service. Its workers execute the
// replays here when the caller waits for them (--wait, or a bulk replay).
func withReplayService(cmd *cobra.Command, cfg *config, o *replayOptions, fn func(*runs.Service, *store.Store) error) error {
	eng := o.eng
	if !o.wait && o.action == "" {
		eng.workers = 0
	}
	return withExecutor(cmd, cfg, eng, fn)
}

// params builds the replay request the flags describe.
func (o *replayOptions) params(runID uuid.UUID) (runs.ReplayParams, error) {
	p := runs.ReplayParams{RunID: runID, Mode: o.mode, Tools: o.tools, ApplyResolutions: o.apply, CreatedBy: cliActor()}
	if o.changedFlags != nil && o.changedFlags("turn") {
		turn := o.turn
		p.Turn = &turn
	}
	changed := func(name string) bool { return o.changedFlags != nil && o.changedFlags(name) }
	if o.model != "" || changed("system") || o.configJSON != "" || changed("max-turns") {
		// An explicit --system "" or --max-turns 0 reaches the service, which refuses it.
		p.Overrides = &runs.Overrides{Model: o.model}
		if changed("system") {
			p.Overrides.System = &o.system
		}
		if changed("max-turns") {
			p.Overrides.MaxTurns = &o.maxTurns
		}
		if o.configJSON != "" {
			if !json.Valid([]byte(o.configJSON)) {
				return p, errors.New("--config is not valid JSON")
			}
			p.Overrides.Config = json.RawMessage(o.configJSON)
		}
	}
	if o.editsJSON != "" {
		if err := json.Unmarshal([]byte(o.editsJSON), &p.Edits); err != nil {
			return p, fmt.Errorf("--edits: want a JSON list of edits: %w", err)
		}
	}
	return p, nil
}

func replayOne(ctx context.Context, svc *runs.Service, st *store.Store, o *replayOptions, arg string, out, info io.Writer) error {
	id, err := uuid.Parse(arg)
	if err != nil {
		return fmt.Errorf("run id %q is not a UUID", arg)
	}
	p, err := o.params(id)
	if err != nil {
		return err
	}
	run, err := svc.Replay(ctx, p)
	if err != nil {
		return err
	}
	if !o.wait {
		fmt.Fprintln(out, run.ID)
		return nil
	}
	fmt.Fprintf(info, "%s %s of run %s queued\n", o.mode, run.ID, id)
	ferr := follow(ctx, o.program, st, run, out, info)
	d, err := compareWithOriginal(ctx, st, id, run.ID)
	if err != nil {
		return err
	}
	if d != nil {
		fmt.Fprintf(info, "diverged: %s\n  compare: GET /api/v1/runs/%s/diff/%s\n", describeDivergence(d), id, run.ID)
		return &exitError{code: exitDiverged, msg: fmt.Sprintf("replay %s diverged from run %s", run.ID, id)}
	}
	return ferr
}

// compareWithOriginal says how a settled replay differs from its original: the divergence an exact
// replay stored (the first differing turn, tool call, status or output), else, in every mode, a
// difference in the final status or output (runs.CompareOutcome). A replay that waits for a
// reviewer or was cancelled is not compared; nil means no difference.
func compareWithOriginal(ctx context.Context, st *store.Store, origID, replayID uuid.UUID) (*runs.Divergence, error) {
	d, found, err := divergenceOf(ctx, st, replayID)
	if err != nil {
		return nil, err
	}
	if found {
		return d, nil
	}
	rep, err := st.RunGet(ctx, replayID)
	if err != nil {
		return nil, err
	}
	orig, err := st.RunGet(ctx, origID)
	if err != nil {
		return nil, err
	}
	return runs.CompareOutcome(orig, rep), nil
}

// bulkOutcome is what became of one replay of a bulk replay.
type bulkOutcome struct {
	original, replay uuid.UUID
	status           string
	divergence       *runs.Divergence
	err              error
}

// bulkReplay replays every recent original run of an action, waits for all of them with a progress
// bar on info, compares each with its original, and prints a summary of the runs that differ to
// out. No run to replay is an error: a regression run that checked nothing must not pass.
func bulkReplay(ctx context.Context, svc *runs.Service, st *store.Store, o *replayOptions, out, info io.Writer) error {
	action := o.action
	if svc.Registry().Lookup(action) == nil && svc.Registry().Lookup("/flow/"+action) != nil {
		action = "/flow/" + action
	}
	since, err := parseSinceFlag(o.since)
	if err != nil {
		return err
	}
	originals, err := st.RunListReplayable(ctx, store.RunListReplayableParams{Action: action, Since: since, Limit: o.limit})
	if err != nil {
		return err
	}
	if len(originals) == 0 {
		msg := fmt.Sprintf("no run of %s to replay since %s", action, since.Format(time.RFC3339))
		if svc.Registry().Lookup(action) == nil {
			msg += " (no action of that name is registered)"
		}
		return errors.New(msg)
	}
	outcomes := make([]*bulkOutcome, len(originals))
	for i, orig := range originals {
		oc := &bulkOutcome{original: orig.ID}
		outcomes[i] = oc
		p, err := o.params(orig.ID)
		if err != nil {
			return err
		}
		run, err := svc.Replay(ctx, p)
		if err != nil {
			oc.err, oc.status = err, "not replayed"
			continue
		}
		oc.replay, oc.status = run.ID, run.Status
	}
	bar := &progressBar{w: info, label: fmt.Sprintf("replaying %s (%s)", action, o.mode), total: len(outcomes)}
	tick := time.NewTicker(o.progressInterval)
	defer tick.Stop()
	for {
		done, diverged := 0, 0
		for _, oc := range outcomes {
			if oc.err == nil && !settled(oc.status) {
				run, err := st.RunGet(ctx, oc.replay)
				if err != nil {
					return err
				}
				oc.status = run.Status
				if settled(oc.status) {
					if oc.divergence, err = compareWithOriginal(ctx, st, oc.original, oc.replay); err != nil {
						return err
					}
				}
			}
			if oc.err != nil || settled(oc.status) {
				done++
			}
			if oc.divergence != nil {
				diverged++
			}
		}
		bar.draw(done, diverged)
		if done == len(outcomes) {
			break
		}
		select {
		case <-ctx.Done():
			bar.finish()
			return ctx.Err()
		case <-tick.C:
		}
	}
	bar.finish()
	return summarize(out, action, o.mode, outcomes)
}

// settled reports whether a replay has nothing more to do without a reviewer.
func settled(status string) bool {
	return status != store.RunQueued && status != store.RunRunning && status != ""
}

// summarize prints the bulk replay's counts and the runs that differ. An exact replay that matches
// its original is identical, turn by turn; a re-run or a fork is compared by its final status and
// output only (it calls a live model, so its turns may differ), and says so.
func summarize(out io.Writer, action, mode string, outcomes []*bulkOutcome) error {
	var same, diverged, waiting, other int
	for _, oc := range outcomes {
		switch {
		case oc.err != nil:
			other++
		case oc.divergence != nil:
			diverged++
		case oc.status == store.RunInterrupted:
			waiting++
		case oc.status == store.RunSucceeded:
			same++
		default: // failed or aborted as its original did, or cancelled by someone
			other++
		}
	}
	label, sameLabel := "", "identical"
	if mode != store.ReplayExact {
		label, sameLabel = " ("+mode+")", "with the same status and output"
	}
	fmt.Fprintf(out, "replayed %d runs of %s%s: %d %s, %d diverged, %d waiting for a reviewer, %d other\n",
		len(outcomes), action, label, same, sameLabel, diverged, waiting, other)
	if diverged > 0 {
		fmt.Fprintln(out, "diverged:")
		for _, oc := range outcomes {
			if oc.err == nil && oc.divergence != nil {
				fmt.Fprintf(out, "  %s -> %s  %s\n", oc.original, oc.replay, describeDivergence(oc.divergence))
			}
		}
	}
	if other > 0 {
		fmt.Fprintln(out, "other:")
		for _, oc := range outcomes {
			switch {
			case oc.err != nil:
				fmt.Fprintf(out, "  %s  not replayed: %v\n", oc.original, oc.err)
			case oc.divergence != nil:
			case oc.status == store.RunFailed || oc.status == store.RunAborted:
				// Compared: not a divergence, so the original ended the same way.
				fmt.Fprintf(out, "  %s -> %s  %s, as its original did\n", oc.original, oc.replay, oc.status)
			case oc.status == store.RunCancelled:
				fmt.Fprintf(out, "  %s -> %s  cancelled before it ended\n", oc.original, oc.replay)
			}
		}
	}
	if waiting > 0 {
		fmt.Fprintln(out, "replays waiting for a reviewer stopped where their original asked one; --apply-resolutions applies the recorded decisions")
	}
	if diverged > 0 {
		return &exitError{code: exitDiverged, msg: fmt.Sprintf("%d of %d replays diverged", diverged, len(outcomes))}
	}
	for _, oc := range outcomes {
		if oc.err != nil {
			return &exitError{code: 1, msg: "some runs could not be replayed"}
		}
	}
	return nil
}

// divergenceOf returns the divergence the replay recorded; found is false when it recorded none.
func divergenceOf(ctx context.Context, st *store.Store, id uuid.UUID) (d *runs.Divergence, found bool, err error) {
	r, err := st.ReplayGet(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if len(r.Divergence) == 0 {
		return nil, false, nil
	}
	d = &runs.Divergence{}
	if err := json.Unmarshal(r.Divergence, d); err != nil {
		return nil, false, fmt.Errorf("decode divergence of replay %s: %w", id, err)
	}
	return d, true, nil
}

func describeDivergence(d *runs.Divergence) string {
	var b strings.Builder
	fmt.Fprintf(&b, "turn %d %s", d.Turn, d.Part)
	if d.Ref != "" {
		fmt.Fprintf(&b, " %s (ref %s)", d.Tool, d.Ref)
	}
	if d.Path != "" {
		fmt.Fprintf(&b, " at %s", d.Path)
	}
	if d.Original != nil || d.Replay != nil {
		a, _ := json.Marshal(d.Original)
		r, _ := json.Marshal(d.Replay)
		fmt.Fprintf(&b, ": %s -> %s", abbreviate(string(a), 60), abbreviate(string(r), 60))
	} else if d.Message != "" {
		fmt.Fprintf(&b, ": %s", d.Message)
	}
	return b.String()
}

func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func parseSinceFlag(v string) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want a duration such as 24h or an RFC 3339 time", v)
	}
	return t, nil
}

// progressBar draws one self-overwriting line on a terminal (stderr).
type progressBar struct {
	w     io.Writer
	label string
	total int
	last  string
}

const progressWidth = 30

func (p *progressBar) draw(done, diverged int) {
	filled := 0
	if p.total > 0 {
		filled = done * progressWidth / p.total
	}
	line := fmt.Sprintf("\r%s [%s%s] %d/%d, %d diverged", p.label, strings.Repeat("#", filled),
		strings.Repeat(".", progressWidth-filled), done, p.total, diverged)
	if line != p.last {
		fmt.Fprint(p.w, line)
		p.last = line
	}
}

func (p *progressBar) finish() { fmt.Fprintln(p.w) }
