package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

func newInterruptsCommand(cfg *config) *cobra.Command {
	cmd := groupCommand("interrupts", "List and resolve the interrupts waiting for a reviewer")

	var status string
	list := &cobra.Command{
		Use:   "list",
		Short: "List interrupts, oldest first (pending ones by default)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if status != "" && !slices.Contains(store.InterruptStatuses, status) {
				return fmt.Errorf("--status %q: want one of %s, or empty for all", status, strings.Join(store.InterruptStatuses, ", "))
			}
			return withStore(cmd, cfg, func(st *store.Store) error {
				// Every match, a page at a time.
				var items []*store.InterruptWithAction
				p := store.InterruptListParams{Status: status, Limit: store.InterruptListMax}
				for {
					page, err := st.InterruptList(cmd.Context(), p)
					if err != nil {
						return err
					}
					items = append(items, page...)
					if len(page) < p.Limit {
						break
					}
					last := page[len(page)-1]
					p.After = &store.InterruptCursor{CreatedAt: last.CreatedAt, ID: last.ID}
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tRUN\tTOOL\tSTATUS\tAGE\tASKS")
				for _, i := range items {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", i.ID, shortRunID(i.RunID), i.Tool, i.Status,
						time.Since(i.CreatedAt).Round(time.Second), i.Metadata)
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().StringVar(&status, "status", store.InterruptPending, "pending, approved, edited, responded, denied, cancelled, or empty for all")

	var (
		approve, deny bool
		edit, respond string
		comment       string
		expectVersion int64
	)
	resolve := &cobra.Command{
		Use:   "resolve <interrupt-id> --approve | --edit JSON | --respond JSON | --deny [--comment TEXT]",
		Short: "Resolve an interrupt; when it was its run's last, the run resumes on a worker",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return fmt.Errorf("interrupt id %q is not a UUID", args[0])
			}
			p := runs.ResolveParams{InterruptID: id, Comment: comment, Version: expectVersion, Actor: cliActor()}
			chosen := 0
			if approve {
				p.Action, chosen = runs.ActionApprove, chosen+1
			}
			if deny {
				p.Action, chosen = runs.ActionDeny, chosen+1
			}
			if edit != "" {
				p.Action, p.Input, chosen = runs.ActionEdit, json.RawMessage(edit), chosen+1
			}
			if respond != "" {
				p.Action, p.Output, chosen = runs.ActionRespond, json.RawMessage(respond), chosen+1
			}
			if chosen != 1 {
				return errors.New("give exactly one of --approve, --edit JSON, --respond JSON, --deny")
			}
			return withStore(cmd, cfg, func(st *store.Store) error {
				reg, err := newRegistry(cfg.program, engineOptions{}, nil, nopLogger())
				if err != nil {
					return err
				}
				rc, err := runsConfig(cfg.program, engineOptions{}, nopLogger())
				if err != nil {
					return err
				}
				svc, err := runs.New(rc, st, reg)
				if err != nil {
					return err
				}
				it, err := svc.Resolve(cmd.Context(), p)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "interrupt %s %s by %s\n", it.ID, it.Status, *it.ResolvedBy)
				return nil
			})
		},
	}
	resolve.Flags().BoolVar(&approve, "approve", false, "approve: run the tool as requested")
	resolve.Flags().StringVar(&edit, "edit", "", "approve with this input instead (JSON, checked against the tool's input schema)")
	resolve.Flags().StringVar(&respond, "respond", "", "answer with this output instead of running the tool (JSON, checked against its output schema)")
	resolve.Flags().BoolVar(&deny, "deny", false, "deny: the model is told the call was refused")
	resolve.Flags().StringVar(&comment, "comment", "", "a comment for the audit log (and the denial's reason)")
	resolve.Flags().Int64Var(&expectVersion, "version", 0, "fail unless the interrupt is still at this version")

	cmd.AddCommand(list, resolve)
	return cmd
}

// withStore opens the database (migrating it) and runs fn with a store on it.
func withStore(cmd *cobra.Command, cfg *config, fn func(*store.Store) error) error {
	return withDatabase(cmd.Context(), cfg, true, func(db *database, _ *slog.Logger) error {
		return fn(store.New(db.pool))
	})
}

// shortRunID is a run id's last 8 digits, its random part, as the pages show it.
func shortRunID(id uuid.UUID) string { return id.String()[28:] }
