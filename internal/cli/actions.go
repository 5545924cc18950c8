package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/loupe-dev/loupe/internal/engine"
)

func newActionsCommand(cfg *config) *cobra.Command {
	var (
		asJSON bool
		eng    engineOptions
	)
	cmd := &cobra.Command{
		Use:   "actions [--json]",
		Short: "List this program's actions: the flows, prompts, tools and models it can run",
		Long: `List this program's actions, each with its key (what devui run takes), its type and its
description. With --json, each action's full description, its input and output JSON schemas
included, as GET /api/v1/actions has it. Needs no database.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := cfg.logger()
			if err != nil {
				return err
			}
			reg, err := newRegistry(cfg.program, eng, nil, log)
			if err != nil {
				return err
			}
			list := reg.List()
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			for _, d := range list {
				if d.Type == engine.ActionTypeUtil {
					continue
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", d.Key, d.Type, d.Description)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each action's description as JSON")
	cmd.Flags().BoolVar(&eng.noDemo, "no-demo", false, "do not list the demo agents")
	cmd.Flags().StringVar(&eng.prompts, "prompts", os.Getenv("LOUPE_PROMPTS"), "also list the prompts of this directory of .prompt files (env LOUPE_PROMPTS)")
	return cmd
}
