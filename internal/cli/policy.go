package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/policy"
	"github.com/loupe-dev/loupe/internal/runs"
	"github.com/loupe-dev/loupe/internal/store"
)

// policyFileInterval is how often --policy-file is checked for a change.
const policyFileInterval = 2 * time.Second

// watchPolicyFile stores the policy file as the version in force, now and whenever it changes, until
// the stack stops. A broken file at start is an error; a later one is logged, the last good
// version staying in force.
func watchPolicyFile(ctx context.Context, st *stack, s *store.Store, path string, log *slog.Logger) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("--policy-file %s: %w", path, err)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	st.stops = append(st.stops, cancel)
	err = policy.WatchFile(wctx, abs, policyFileInterval, log, func(src []byte) error {
		p, created, err := runs.SavePolicy(wctx, s, src, "file:"+abs, "policy-file")
		if err != nil {
			return err
		}
		if created {
			log.Info("approval policy loaded", "file", abs, "version", p.Version)
		}
		return nil
	})
	if err != nil {
		cancel()
		return fmt.Errorf("--policy-file %s: %w", path, err)
	}
	return nil
}

func newPolicyCommand(cfg *config) *cobra.Command {
	cmd := groupCommand("policy", "Approval policies: check one, store one, and try one on past decisions")
	check := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a policy file (YAML rules with CEL expressions); prints its rules",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			set, err := policy.Parse(src)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RULE\tACTION\tTOOL\tDECIDES\tWHEN")
			for _, r := range set.Rules {
				decides, when := string(r.Decide), r.When
				if r.Gate != "" {
					decides, when = "gate", r.Gate
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, orDash(r.Action), orDash(r.Tool), decides, orDash(when))
			}
			return tw.Flush()
		},
	}
	apply := &cobra.Command{
		Use:   "apply FILE",
		Short: "Store a policy file as the version in force (what serve --policy-file does on a change)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			return withStore(cmd, cfg, func(st *store.Store) error {
				p, created, err := runs.SavePolicy(cmd.Context(), st, src, "cli", cliActor())
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				if created {
					fmt.Fprintf(cmd.OutOrStdout(), "policy version %d is in force\n", p.Version)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "policy version %d is in force already, with the same rules\n", p.Version)
				}
				return nil
			})
		},
	}
	var (
		last     int
		asJSON   bool
		maxShown int
	)
	whatif := &cobra.Command{
		Use:   "whatif FILE [--last N] [--json]",
		Short: "Apply a draft policy to the last N stored interrupts: what it would approve, deny or leave to a person, and where it disagrees with the decisions people made",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			if _, err := policy.Parse(src); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return withStore(cmd, cfg, func(st *store.Store) error {
				rep, err := runs.PolicyWhatIf(cmd.Context(), st, src, last)
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(rep)
				}
				printWhatIf(cmd, rep, maxShown)
				return nil
			})
		},
	}
	whatif.Flags().IntVar(&last, "last", 1000, "how many of the newest stored interrupts to try it on")
	whatif.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	whatif.Flags().IntVar(&maxShown, "show", 50, "how many disagreements to list (--json lists all)")
	cmd.AddCommand(check, apply, whatif)
	return cmd
}

func printWhatIf(cmd *cobra.Command, rep *policy.Report, maxShown int) {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "%d interrupts: %d approved, %d denied, %d left to a person (%d routed by a rule)\n",
		rep.Interrupts, rep.Approve, rep.Deny, rep.Ask, rep.AskByRule)
	if rep.Pending > 0 {
		fmt.Fprintf(out, "%d of them still wait for a person and would be decided\n", rep.Pending)
	}
	if rep.Errors > 0 {
		fmt.Fprintf(out, "%d rule evaluations failed (a missing field, say) and did not match\n", rep.Errors)
	}
	if len(rep.Disagreements) == 0 {
		fmt.Fprintln(out, "no disagreement with the decisions made")
		return
	}
	fmt.Fprintf(out, "%d disagreements with the decisions made:\n", len(rep.Disagreements))
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INTERRUPT\tTOOL\tRULE\tPOLICY\tDECIDED\tBY")
	for i, d := range rep.Disagreements {
		if i == maxShown {
			fmt.Fprintf(tw, "… %d more (--show N, or --json)\n", len(rep.Disagreements)-maxShown)
			break
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.InterruptID, d.Tool, d.Rule, d.Policy, d.Status, orDash(d.ResolvedBy))
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
