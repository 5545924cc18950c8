package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/loupe-dev/loupe/internal/engine"
	"github.com/loupe-dev/loupe/internal/runs"
)

// promptsReloadInterval is how often serve --dev looks for changed .prompt files.
const promptsReloadInterval = 500 * time.Millisecond

// loadPrompts loads --prompts (LOUPE_PROMPTS) into the registry, once per directory and process.
// A directory that cannot be read stops the command; files that do not load are logged, and their
// prompts list with the error.
func loadPrompts(reg *engine.Registry, dir string, log *slog.Logger) error {
	if dir == "" {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("--prompts %s: %w", dir, err)
	}
	for _, d := range reg.PromptDirs() {
		if d.Dir() == abs {
			return nil
		}
	}
	d, err := engine.LoadPromptDir(reg, abs)
	if d == nil {
		return fmt.Errorf("--prompts: %w", err)
	}
	logPromptErrors(d, log)
	return nil
}

func logPromptErrors(d *engine.PromptDir, log *slog.Logger) {
	for _, e := range d.Errors() {
		log.Warn("a .prompt file did not load; its prompt lists with the error until the file is fixed", "err", e.Error())
	}
}

// watchPrompts reloads the registry's prompt directories when a file changes, until ctx ends,
// and announces the new catalogue: serve --dev edits prompts without a restart.
func watchPrompts(ctx context.Context, reg *engine.Registry, svc *runs.Service, log *slog.Logger) {
	dirs := reg.PromptDirs()
	if len(dirs) == 0 {
		return
	}
	t := time.NewTicker(promptsReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var changed bool
		for _, d := range dirs {
			ok, err := d.Reload()
			if err != nil {
				log.Warn("reload prompts", "dir", d.Dir(), "err", err)
				continue
			}
			if ok {
				changed = true
				log.Info("prompts reloaded", "dir", d.Dir(), "broken", len(d.Errors()))
				logPromptErrors(d, log)
			}
		}
		if changed {
			if err := svc.Announce(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Warn("announce reloaded prompts", "err", err)
			}
		}
	}
}
