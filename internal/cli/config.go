package cli

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// version is the running program's version (Program.Version), set once by Run before any command
// runs.
var version = "dev"

// config is devui's configuration, parsed once from flags and the environment and passed down
// explicitly. Flags win over environment variables, which win over defaults.
type config struct {
	program     *Program
	DatabaseURL string
	Addr        string
	DataDir     string
	LogLevel    string
	LogFormat   string
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// bindCommon registers the flags every subcommand shares.
func (c *config) bindCommon(fs *pflag.FlagSet) {
	fs.StringVar(&c.DatabaseURL, "database-url", "", "PostgreSQL URL; empty starts the embedded cluster (env DATABASE_URL)")
	fs.StringVar(&c.DataDir, "data-dir", envOr("LOUPE_DATA_DIR", ".devui"), "data directory, home of the embedded cluster (env LOUPE_DATA_DIR)")
	fs.StringVar(&c.LogLevel, "log-level", envOr("LOG_LEVEL", "info"), "debug, info, warn or error (env LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", envOr("LOG_FORMAT", "text"), "text or json (env LOG_FORMAT)")
}

// logger builds the slog logger the configuration asks for.
func (c *config) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, fmt.Errorf("LOG_LEVEL %q: want debug, info, warn or error", c.LogLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(c.LogFormat) {
	case "text", "":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("LOG_FORMAT %q: want text or json", c.LogFormat)
}

// nopLogger discards logs, for commands whose output is their result.
func nopLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
