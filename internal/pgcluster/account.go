package pgcluster

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// account is the unprivileged user that runs initdb and postgres when devui runs as root, since
// PostgreSQL refuses to run as root. A nil account means "the current user".
type account struct {
	name     string
	uid, gid uint32
}

// serverAccount picks the account for the server when devui runs as root: "postgres", falling
// back to "nobody". Otherwise the server runs as the current user (a nil account).
func serverAccount() (*account, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &account{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("pgcluster: running as root, and neither user postgres nor nobody exists to run PostgreSQL (it refuses to run as root); create one with: useradd --system postgres")
}

// credential is the SysProcAttr credential that runs a child as the account.
func (a *account) credential() *syscall.Credential {
	if a == nil {
		return nil
	}
	return &syscall.Credential{Uid: a.uid, Gid: a.gid, NoSetGroups: true}
}

// own hands a path to the account.
func (a *account) own(path string) error {
	if a == nil {
		return nil
	}
	if err := os.Chown(path, int(a.uid), int(a.gid)); err != nil {
		return fmt.Errorf("pgcluster: give %s to user %s: %w", path, a.name, err)
	}
	return nil
}

// checkReachable fails clearly when the account cannot traverse every parent of dir, which would
// make initdb fail with a confusing permission error.
func (a *account) checkReachable(dir string) error {
	if a == nil {
		return nil
	}
	for p := dir; ; p = filepath.Dir(p) {
		info, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		mode := info.Mode().Perm()
		traversable := mode&0o001 != 0 ||
			(ok && st.Uid == a.uid && mode&0o100 != 0) ||
			(ok && st.Gid == a.gid && mode&0o010 != 0)
		if !traversable {
			return fmt.Errorf("pgcluster: the data dir %s is not reachable by user %s, which runs PostgreSQL because devui runs as root: %s has mode %s; choose another LOUPE_DATA_DIR or run: chmod o+x %s", dir, a.name, p, mode, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
