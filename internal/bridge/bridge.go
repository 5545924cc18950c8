// Package bridge lets Loupe's own commands reach the engine registry behind a public loupe.App
// without making it part of the public API: package loupe fills these in when it is initialised.
package bridge

import "github.com/loupe-dev/loupe/internal/engine"

var (
	// AppRegistry returns the registry of a *loupe.App.
	AppRegistry func(app any) *engine.Registry
	// NewApp returns a *loupe.App over reg.
	NewApp func(reg *engine.Registry) any
)
