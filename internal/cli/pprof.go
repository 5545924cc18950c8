package cli

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/loupe-dev/loupe/internal/server"
)

// startProfiler serves Go's profiling endpoints (/debug/pprof/) on LOUPE_PPROF_ADDR, a loopback
// address, when that is set: the way to see where a running server's CPU goes under load. It is
// a separate listener, never the UI's, so that it is off unless asked for and never public.
func startProfiler(ctx context.Context, log *slog.Logger) error {
	addr := os.Getenv("LOUPE_PPROF_ADDR")
	if addr == "" {
		return nil
	}
	if err := server.CheckLoopback(addr); err != nil {
		return errors.New("LOUPE_PPROF_ADDR must be a loopback address: " + err.Error())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() { _ = srv.Serve(ln) }()
	log.Info("profiler listening", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return nil
}
