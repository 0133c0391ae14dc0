package chaostest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgen/toolgen/internal/freeport"
)

// cluster is a throwaway PostgreSQL cluster of the test's own: initdb in a temporary
// directory, its own free port on 127.0.0.1, its unix socket in that directory,
// trust authentication. It never touches the machine's shared server.
//
// The postmaster is a direct child of the test process (not daemonized by pg_ctl
// start) with Pdeathsig=SIGKILL: if the test binary dies — a panic, go test's
// -timeout, a ^C — the kernel kills the postmaster and its backends follow it, so no
// run can leave a server behind. Stopping sends the signal pg_ctl stop -m sends
// (SIGQUIT for immediate, SIGINT for fast) and waits for the postmaster to exit;
// starting runs postgres -D again and waits until it accepts a connection (pg_ctl
// start -w waits for the same thing).
type cluster struct {
	bin  string // directory of initdb and postgres
	dir  string // the temporary directory: data/, the socket, postgres.log
	data string
	port int
	cred *syscall.Credential // the postgres user's, when the test runs as root

	mu   sync.Mutex
	proc *exec.Cmd
	done <-chan struct{} // closed when proc has exited
}

// tempPrefix names the cluster directories (os.TempDir()/toolgen-chaos-*); a file
// "owner" in each holds the test process's pid, so a later run can remove the
// directory of a run that died before its cleanup.
const tempPrefix = "toolgen-chaos-"

// findBinDir returns the directory holding initdb and postgres: $CHAOSTEST_PG_BINDIR,
// pg_config --bindir, the newest /usr/lib/postgresql/*/bin, or initdb on PATH.
func findBinDir() (string, error) {
	var candidates []string
	if d := os.Getenv("CHAOSTEST_PG_BINDIR"); d != "" {
		candidates = append(candidates, d)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	candidates = append(candidates, dirs...)
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	for _, d := range candidates {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("initdb and postgres not found (looked at $CHAOSTEST_PG_BINDIR, pg_config --bindir, " +
		"/usr/lib/postgresql/*/bin and PATH): install the PostgreSQL server package to run the chaos test")
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// newCluster creates, configures and starts a cluster, and registers its cleanup
// (stop immediately, remove the directory) with t. It skips t when PostgreSQL's
// server binaries are not installed.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	bin, err := findBinDir()
	if err != nil {
		t.Skip("chaostest: " + err.Error())
	}
	removeStaleDirs(t)
	c := &cluster{bin: bin}
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root: run them as the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("chaostest: running as root and there is no postgres user to run initdb and postgres as: " + err.Error())
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	}
	dir, err := os.MkdirTemp(tempRoot(c.cred != nil), tempPrefix)
	if err != nil {
		t.Fatal(err)
	}
	c.dir, c.data = dir, filepath.Join(dir, "data")
	t.Cleanup(func() {
		c.stop("immediate")
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove the cluster directory: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	// The postgres user needs the directory (for data/ and the socket); MkdirTemp made it 0700.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if c.cred != nil {
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	// Below the ephemeral range (freeport): the cluster restarts on this port, and a
	// connection given it as its own while the cluster is down would keep it off.
	if c.port, err = freeport.Pick(); err != nil {
		t.Fatal(err)
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	conf := fmt.Sprintf(`
# chaostest: a throwaway cluster on its own port and socket
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 60
shared_buffers = 32MB
logging_collector = off
log_min_messages = warning
`, c.port, dir)
	f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, werr := f.WriteString(conf)
	if err := errors.Join(werr, f.Close()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// DSN is the cluster's connection string. connect_timeout bounds a connection
// attempt to a server that is starting or stopping.
func (c *cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", c.port)
}

// start runs the postmaster and returns when it accepts connections, with how long
// that took (crash recovery included after an immediate stop).
func (c *cluster) start() (time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		return 0, errors.New("chaostest: the cluster is already running")
	}
	logf, err := os.OpenFile(filepath.Join(c.dir, "postgres.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.data)
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGKILL}
	begin := time.Now()
	done, err := startOwned(cmd)
	if err != nil {
		return 0, fmt.Errorf("chaostest: start postgres: %w", err)
	}
	c.proc, c.done = cmd, done
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-done:
			c.proc = nil
			return 0, fmt.Errorf("chaostest: postgres exited while starting (%v); its log:\n%s", cmd.ProcessState, c.logTail())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, c.DSN())
		if err == nil {
			conn.Close(ctx)
			cancel()
			return time.Since(begin), nil
		}
		cancel()
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("chaostest: postgres did not accept connections within 90 s: %v; its log:\n%s", err, c.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop stops the postmaster the way pg_ctl stop -m mode does and waits for it to exit.
// It does nothing when the cluster is not running.
func (c *cluster) stop(mode string) (time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0, nil
	}
	sig := syscall.SIGQUIT // immediate: no shutdown checkpoint, crash recovery at the next start
	if mode == "fast" {
		sig = syscall.SIGINT // fast: roll back, disconnect the clients, checkpoint
	}
	begin := time.Now()
	_ = c.proc.Process.Signal(sig)
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		_ = c.proc.Process.Kill()
		<-c.done
	}
	c.proc = nil
	return time.Since(begin), nil
}

func (c *cluster) logTail() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// startOwned starts cmd from a goroutine locked to its OS thread, which stays locked
// until cmd exits: Pdeathsig fires when the thread that forked the child exits, and
// the Go runtime could otherwise retire that thread while the child still runs. The
// returned channel is closed when cmd has exited and been reaped.
func startOwned(cmd *exec.Cmd) (<-chan struct{}, error) {
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		goruntime.LockOSThread() // never unlocked: the thread ends with this goroutine, after the child
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}

// tempRoot is where the cluster directory goes: os.TempDir(), unless the postgres
// user (asUser) could not reach it there (a $TMPDIR under /root), then /tmp.
func tempRoot(asUser bool) string {
	root := os.TempDir()
	if !asUser {
		return root
	}
	for d := root; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return root
		}
	}
}

// removeStaleDirs removes cluster directories left by runs whose process is gone
// (their postmaster died with them, by Pdeathsig; only the files remain).
func removeStaleDirs(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	if os.TempDir() != "/tmp" {
		more, _ := filepath.Glob(filepath.Join("/tmp", tempPrefix+"*"))
		dirs = append(dirs, more...)
	}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // unreadable, or its owner may still run
		}
		if err := os.RemoveAll(d); err == nil {
			t.Logf("removed the directory of an earlier run that died before its cleanup: %s", d)
		}
	}
}
