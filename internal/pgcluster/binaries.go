// Package pgcluster runs a private PostgreSQL cluster from the server binaries installed on the
// machine. It is Loupe's embedded default: with no DATABASE_URL, devui keeps its own cluster under
// its data directory, listening on a unix socket there and on a free loopback port.
package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries reports that no PostgreSQL server binaries were found. Its message names the three
// ways out.
var ErrNoBinaries = errors.New(`no PostgreSQL server binaries found (looked for initdb and postgres on PATH, in "pg_config --bindir", /usr/lib/postgresql/*/bin and Homebrew's paths).
Three ways out:
  1. install PostgreSQL:  sudo apt-get install -y postgresql   (Debian/Ubuntu)
                          brew install postgresql@16           (macOS)
  2. run one in Docker:   docker compose up -d db
                          export DATABASE_URL=postgres://loupe:loupe@127.0.0.1:5432/loupe?sslmode=disable
  3. point DATABASE_URL at any PostgreSQL server you already have`)

// homebrewDirs are the usual places Homebrew installs PostgreSQL on Apple silicon and Intel Macs.
var homebrewDirs = []string{
	"/opt/homebrew/opt/postgresql@17/bin", "/opt/homebrew/opt/postgresql@16/bin",
	"/opt/homebrew/opt/postgresql@15/bin", "/opt/homebrew/opt/postgresql/bin", "/opt/homebrew/bin",
	"/usr/local/opt/postgresql@17/bin", "/usr/local/opt/postgresql@16/bin",
	"/usr/local/opt/postgresql@15/bin", "/usr/local/opt/postgresql/bin", "/usr/local/bin",
}

// FindBinDir returns the directory holding initdb, postgres and pg_ctl. It tries PATH, then
// pg_config --bindir, then /usr/lib/postgresql/*/bin (newest major version first), then Homebrew.
func FindBinDir() (string, error) {
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // /usr/local/bin/initdb may link into the real bindir
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	candidates = append(candidates, debianBinDirs()...)
	candidates = append(candidates, homebrewDirs...)
	for _, dir := range candidates {
		if hasServer(dir) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

// debianBinDirs lists /usr/lib/postgresql/<major>/bin, newest major first.
func debianBinDirs() []string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	major := func(p string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(p)), 64)
		return v
	}
	sort.Slice(matches, func(i, j int) bool { return major(matches[i]) > major(matches[j]) })
	return matches
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres", "pg_ctl"} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// binary returns the path of one server program.
func (c *Cluster) binary(name string) string { return filepath.Join(c.binDir, name) }

// versionOf reports "initdb (PostgreSQL) 15.x" style output, for error messages.
func versionOf(path string) string {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return fmt.Sprintf("%s (version unknown: %v)", path, err)
	}
	return strings.TrimSpace(string(out))
}
