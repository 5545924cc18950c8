package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// exitError ends devui with a specific exit code.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func newRunCommand(cfg *config) *cobra.Command {
	var (
		input string
		wait  bool
		eng   engineOptions
	)
	cmd := &cobra.Command{
		Use:   "run <action> [--input JSON] [--wait]",
		Short: "Start a run of a registered action; with --wait, execute it here and follow it to the end",
		Long: `Start a run of a registered action, such as travelAgent or /flow/transferMoney.

Without --wait the run is queued for the workers of devui serve or devui worker, and its id printed.
With --wait this process also executes runs, streams the run's output as it comes, and exits with
0 when it succeeded, 3 when it waits for a reviewer (see devui interrupts), 1 otherwise.`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) == 2:
				return fmt.Errorf("run takes the action only; pass its input with --input %q", args[1])
			case len(args) != 1:
				return fmt.Errorf("run takes one action, as in: %s run travelAgent --input '{\"destination\":\"Lisbon\"}' (%s actions lists them)",
					cfg.program.name(), cfg.program.name())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !wait {
				eng.workers = 0
			}
			return withExecutor(cmd, cfg, eng, func(svc *runs.Service, st *store.Store) error {
				return startAndFollow(cmd, cfg.program.name(), svc, st, args[0], input, wait)
			})
		},
	}
	cmd.Flags().StringVar(&input, "input", "null", "the action's input, as JSON")
	cmd.Flags().BoolVar(&wait, "wait", false, "execute and follow the run until it ends or waits for a reviewer")
	eng.bind(cmd.Flags(), 1)
	return cmd
}

// startAndFollow starts a run and, with wait, follows it to the end.
func startAndFollow(cmd *cobra.Command, program string, svc *runs.Service, st *store.Store, action, input string, wait bool) error {
	ctx := cmd.Context()
	run, err := svc.StartRun(ctx, runs.StartParams{Action: action, Input: json.RawMessage(input), CreatedBy: cliActor()})
	var unknown *runs.UnknownActionError
	if errors.As(err, &unknown) {
		return fmt.Errorf("%w: run %q to list this program's actions", err, program+" actions")
	}
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if !wait {
		fmt.Fprintln(out, run.ID)
		return nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "run %s (%s) queued\n", run.ID, run.Action)
	return follow(ctx, program, st, run, out, cmd.ErrOrStderr())
}

// follow prints a run's streamed text and status changes until it settles.
func follow(ctx context.Context, program string, st *store.Store, run *store.Run, out, info io.Writer) error {
	var after int64
	printer := &chunkPrinter{w: out}
	status := run.Status
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	drain := func() error {
		chunks, err := st.ChunkList(ctx, run.ID, after, 0)
		if err != nil {
			return err
		}
		for _, c := range chunks {
			after = c.Seq
			printer.print(c)
		}
		return nil
	}
	for {
		if err := drain(); err != nil {
			return err
		}
		cur, err := st.RunGet(ctx, run.ID)
		if err != nil {
			return err
		}
		if cur.Status != status && cur.Status != store.RunRunning && cur.Status != store.RunQueued {
			// The run settled after the chunks were read: the chunks it wrote before settling
			// (committed by then) come first, then its status and output.
			if err := drain(); err != nil {
				return err
			}
		}
		if cur.Status != status {
			status = cur.Status
			printer.endLine()
			fmt.Fprintf(info, "[%s] turns=%d tokens=%d/%d\n", status, cur.Turns, cur.InputTokens, cur.OutputTokens)
		}
		switch status {
		case store.RunSucceeded:
			printer.endLine()
			fmt.Fprintf(out, "output: %s\n", cur.Output)
			return nil
		case store.RunInterrupted:
			list, err := st.InterruptListByRun(ctx, run.ID)
			if err != nil {
				return err
			}
			for _, i := range list {
				if i.Status == store.InterruptPending {
					fmt.Fprintf(info, "waiting for a reviewer: interrupt %s, tool %s, %s\n  resolve with: %s interrupts resolve %s --approve\n", i.ID, i.Tool, i.Metadata, program, i.ID)
				}
			}
			return &exitError{code: 3, msg: "run " + run.ID.String() + " is waiting for a reviewer"}
		case store.RunFailed, store.RunAborted, store.RunCancelled:
			return &exitError{code: 1, msg: fmt.Sprintf("run %s %s: %s", run.ID, status, cur.Error)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// chunkPrinter prints a run's stream: the model's text as it comes, inline, and each chunk a flow
// sent itself on a line of its own. A flow that relays its generate's chunks (ai.WithStreaming
// with its own callback) sends what the generate's text already printed: those are not printed
// twice.
type chunkPrinter struct {
	w      io.Writer
	inline bool // a line of model text is open
}

func (p *chunkPrinter) print(c *store.RunChunk) {
	if c.Role != "flow" {
		var parts []struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(c.Content, &parts) == nil {
			for _, part := range parts {
				if part.Text != "" {
					fmt.Fprint(p.w, part.Text)
					p.inline = true
				}
			}
		}
		return
	}
	var relayed struct {
		Content []json.RawMessage `json:"content"`
	}
	if json.Unmarshal(c.Content, &relayed) == nil && relayed.Content != nil {
		return
	}
	p.endLine()
	fmt.Fprintln(p.w, string(c.Content))
}

// endLine ends an open line of model text.
func (p *chunkPrinter) endLine() {
	if p.inline {
		fmt.Fprintln(p.w)
		p.inline = false
	}
}

// cliActor names the person using the CLI in the audit log.
func cliActor() string {
	if u := os.Getenv("USER"); u != "" {
		return "cli:" + u
	}
	return "cli"
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}
