// Package genkitapptest runs the real Genkit JS app of compat/genkit-js for tests: with node, its
// npm packages installed from the committed lock file with `npm ci` when they are missing, so a
// fresh clone with node and npm (which .ci/run installs) runs them. Without node or npm a test
// that needs the app fails, saying so.
package genkitapptest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	npmOnce sync.Once
	npmErr  error
)

// appSource is compat/genkit-js of this checkout.
func appSource(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "compat", "genkit-js")
}

// ensurePackages installs the app's npm packages once per test binary when they are missing.
func ensurePackages(t *testing.T) string {
	t.Helper()
	src := appSource(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("these tests run the Genkit JS app in compat/genkit-js with node, which is not installed: apt-get install -y nodejs npm")
	}
	npmOnce.Do(func() {
		// The marker is written once npm ci has finished: a tree another test binary is still
		// installing (its files appear one by one) is not taken for an installed one. It names
		// the lock file's hash, so that a tree installed from an older lock file (a checkout
		// that has since gained a package) is installed again.
		lockFile, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
		if err != nil {
			npmErr = err
			return
		}
		sum := sha256.Sum256(lockFile)
		marker := filepath.Join(src, "node_modules", ".loupe-npm-ci-"+hex.EncodeToString(sum[:6]))
		installed := func() bool {
			_, err := os.Stat(marker)
			return err == nil
		}
		if installed() {
			return
		}
		// Test binaries run at once (go test ./...): one installs, the others wait for it.
		lock, err := os.OpenFile(filepath.Join(src, ".npm-ci.lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			npmErr = err
			return
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			npmErr = err
			return
		}
		defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
		if installed() {
			return
		}
		if _, err := exec.LookPath("npm"); err != nil {
			npmErr = fmt.Errorf("the Genkit JS app's packages are not installed and npm is missing: apt-get install -y npm, then npm ci in %s", src)
			return
		}
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			npmErr = fmt.Errorf("npm ci in %s: %v\n%s", src, err, out)
			return
		}
		npmErr = os.WriteFile(marker, nil, 0o644)
	})
	require.NoError(t, npmErr)
	return src
}

// Project is a throwaway Genkit project: the app and its package.json, its node_modules linked
// from compat/genkit-js. Runtime files land in its .genkit/runtimes/.
func Project(t *testing.T) string {
	t.Helper()
	src := ensurePackages(t)
	dir := t.TempDir()
	for _, f := range []string{"app.mjs", "package.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	abs, err := filepath.Abs(filepath.Join(src, "node_modules"))
	require.NoError(t, err)
	require.NoError(t, os.Symlink(abs, filepath.Join(dir, "node_modules")))
	return dir
}

// App is a running app.
type App struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	dir    string
	exited chan struct{}
}

// Start runs the app named name in the project with GENKIT_ENV=dev, and stops it when the
// test ends; env adds variables (NO_DEFAULT_MODEL=1). It returns once the app's reflection server listens (its runtime file is written).
//
// Genkit JS picks its reflection port by probing 3100..3200 for a free one and binding it later,
// so two apps starting at once can pick the same port and one dies with EADDRINUSE. Starts are
// therefore serialised across every test binary on the machine (a file lock held until the app
// has written its runtime file), and an app that still loses the race (to one that devui start
// runs, which restarts it by itself) is started again.
func Start(t *testing.T, dir, name string, env ...string) *App {
	t.Helper()
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "loupe-genkit-app-start.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer lock.Close()
	require.NoError(t, syscall.Flock(int(lock.Fd()), syscall.LOCK_EX))
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	for attempt := 1; ; attempt++ {
		a := start(t, dir, name, env)
		switch a.waitListening(t) {
		case nil:
			return a
		case errPortTaken:
			if attempt < 5 {
				t.Logf("app %s lost its reflection port to another process; starting it again", name)
				continue
			}
		}
		t.Fatalf("app %s did not start:\n%s", name, a.out.String())
	}
}

var errPortTaken = errors.New("port taken")

func start(t *testing.T, dir, name string, env []string) *App {
	t.Helper()
	cmd := exec.Command("node", "app.mjs")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GENKIT_ENV=dev", "APP_NAME="+name), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	a := &App{cmd: cmd, out: out, dir: dir, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(a.exited) }()
	t.Cleanup(func() {
		a.signal(syscall.SIGTERM)
		select {
		case <-a.exited:
		case <-time.After(10 * time.Second):
			a.signal(syscall.SIGKILL)
			<-a.exited
		}
		if t.Failed() {
			t.Logf("app %s said:\n%s", name, out.String())
		}
	})
	return a
}

// waitListening waits until the app has written its runtime file (named after its pid), or has
// exited: errPortTaken when it died of EADDRINUSE.
func (a *App) waitListening(t *testing.T) error {
	t.Helper()
	pattern := filepath.Join(a.dir, ".genkit", "runtimes", strconv.Itoa(a.cmd.Process.Pid)+"-*.json")
	deadline := time.After(2 * time.Minute)
	for {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return nil
		}
		select {
		case <-a.exited:
			if strings.Contains(a.out.String(), "EADDRINUSE") {
				return errPortTaken
			}
			return errors.New("exited")
		case <-deadline:
			return errors.New("no runtime file within 2 minutes")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// syncBuffer is the app's output, written by the process's pipes and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (a *App) signal(sig syscall.Signal) { _ = a.cmd.Process.Signal(sig) }

// Kill ends the app at once: its runtime file stays behind, as after a crash.
func (a *App) Kill(t *testing.T) {
	a.signal(syscall.SIGKILL)
	select {
	case <-a.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the app did not die")
	}
}
