// Package migrations holds Loupe's goose SQL migrations, embedded so that the binary can apply them
// itself (devui migrate, or devui serve at start).
package migrations

import "embed"

// FS holds every migration file, in goose's NNNNN_name.sql form.
//
//go:embed *.sql
var FS embed.FS
