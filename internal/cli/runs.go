package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/store"
)

func newRunsCommand(cfg *config) *cobra.Command {
	cmd := groupCommand("runs", "List runs and show one: its status, output or error, and what it waits for")

	var status, action string
	var limit int
	list := &cobra.Command{
		Use:   "list [--status S] [--action A] [--limit N]",
		Short: "List runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if status != "" && !slices.Contains(store.RunStatuses, status) {
				return fmt.Errorf("--status %q: want one of %s, or empty for all", status, strings.Join(store.RunStatuses, ", "))
			}
			if limit < 1 || limit > 500 {
				return fmt.Errorf("--limit %d: want 1 to 500", limit)
			}
			return withStore(cmd, cfg, func(st *store.Store) error {
				list, _, err := st.RunList(cmd.Context(), store.RunListParams{Status: status, Action: normalAction(action), Limit: limit})
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tACTION\tSTATUS\tTURNS\tTOKENS\tAGE")
				for _, r := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d/%d\t%s\n", r.ID, r.Action, r.Status, r.Turns, r.InputTokens, r.OutputTokens,
						time.Since(r.CreatedAt).Round(time.Second))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "queued, running, interrupted, succeeded, failed, aborted, cancelled, or empty for all")
	list.Flags().StringVar(&action, "action", "", "only runs of this action (a flow name or a key such as /flow/x)")
	list.Flags().IntVar(&limit, "limit", 50, "at most this many, 1 to 500")

	get := &cobra.Command{
		Use:   "get <run-id>",
		Short: "Show a run as JSON: its status, input, output or error, usage, and pending interrupts",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return fmt.Errorf("run id %q: %w", args[0], err)
			}
			return withStore(cmd, cfg, func(st *store.Store) error {
				run, err := st.RunGet(cmd.Context(), id)
				if err != nil {
					return err
				}
				interrupts, err := st.InterruptListByRun(cmd.Context(), id)
				if err != nil {
					return err
				}
				pending := []*store.Interrupt{}
				for _, i := range interrupts {
					if i.Status == store.InterruptPending {
						pending = append(pending, i)
					}
				}
				out, err := json.MarshalIndent(struct {
					*store.Run
					Pending []*store.Interrupt `json:"pending_interrupts"`
				}{run, pending}, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(out))
				return err
			})
		},
	}
	cmd.AddCommand(list, get)
	return cmd
}

// normalAction accepts a bare flow name where a registry key is expected.
func normalAction(action string) string {
	if action == "" || strings.HasPrefix(action, "/") {
		return action
	}
	return "/flow/" + action
}
