package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpoints. In WAL mode a commit appends its pages to the WAL, and a checkpoint
// copies the newest version of each page back into the database file, after which
// the next writer starts the WAL over. Left to SQLite, the commit that takes the WAL
// past 1,000 pages runs the checkpoint itself: that one call waits for the copy and
// two fsyncs, and every call pays its share in CPU (in the store benchmark the
// checkpoint was a sixth of the record's CPU, and the calls that ran it were among the
// gateway's slowest).
//
// The store checkpoints in the background instead, as part of its own maintenance:
// a goroutine started by [Open] and stopped by Close runs a PASSIVE checkpoint (it
// never waits for a reader or a writer, so no call waits for it) on a connection of
// its own every checkpointEvery while the WAL grows, backing off to
// checkpointIdleMax while nothing is written. A pass copies what was committed
// before it began, a page written by many of those commits once.
//
// The WAL starts over only when a writer begins while every frame in it has been
// copied, and a pass, which ends with two fsyncs, takes milliseconds: under a steady
// stream of commits one lands during nearly every pass, so the goroutine keeps the
// copying off the calls' path but seldom lets the WAL start over. The commits keep
// SQLite's own checkpoint as the backstop that does: the commit that finds
// autocheckpointPages frames in the WAL (connParams) runs a PASSIVE checkpoint
// itself, which has only the frames since the goroutine's last pass left to copy and,
// as its connection commits nothing meanwhile, usually completes, so the next commit
// starts the WAL over. BenchmarkSteadyRecords (issue 20, BENCHMARKS.md), one caller
// recording 800 read calls a second: the WAL reaches the backstop, and about one
// commit in 1,200 waits for it, up to 10 ms (the copy and the two fsyncs), where
// SQLite's default made one in about 180 wait for the whole copy; at 100 calls a
// second passes complete between commits and the WAL stays near 200 frames. Taking
// the write lock to start the WAL over sooner (a RESTART checkpoint from the goroutine
// past 1,000 or 4,000 frames) made calls wait more often, and back-to-back passes
// while frames remain changed nothing, so neither is done. Another program on the
// same file runs its own settings. Other processes of the store run their own
// checkpointers: when two passes meet, one reports busy and the next carries on.
const (
	checkpointEvery   = 100 * time.Millisecond
	checkpointIdleMax = 4 * time.Second
	// autocheckpointPages is the wal_autocheckpoint of connParams (a literal there).
	autocheckpointPages = 8000
)

// checkpointer runs the store's background checkpoints.
type checkpointer struct {
	db   *sql.DB // one connection of its own, opened like the writer's
	stop chan struct{}
	done chan struct{}
	once sync.Once

	copied atomic.Int64 // passes that checkpointed new frames (tests)
}

// walState is what a checkpoint reports: the WAL's frames and how many of them are in
// the database file.
type walState struct {
	frames, checkpointed int64
}

func startCheckpointer(dsn string) (*checkpointer, error) {
	db, err := oneConnection(dsn)
	if err != nil {
		return nil, err
	}
	c := &checkpointer{db: db, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

func (c *checkpointer) run() {
	defer close(c.done)
	wait := checkpointEvery
	t := time.NewTimer(wait)
	defer t.Stop()
	var last walState
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		now, err := c.checkpoint()
		if err == nil && now != last && now.checkpointed > 0 {
			c.copied.Add(1)
		}
		wait = nextCheckpoint(wait, last, now, err)
		last = now
		t.Reset(wait)
	}
}

// nextCheckpoint is how long to wait after a pass that found now (last before it):
// checkpointEvery while frames arrive, or after an error (a full disk, say: the
// commits' backstop still bounds the WAL), and twice as long as before, up to
// checkpointIdleMax, when nothing was written since the pass before.
func nextCheckpoint(wait time.Duration, last, now walState, err error) time.Duration {
	if err != nil || now != last || now.checkpointed < now.frames {
		return checkpointEvery
	}
	return min(2*wait, checkpointIdleMax)
}

// checkpoint runs one PASSIVE checkpoint. Its busy column is not an error: another
// connection was checkpointing, or a reader still needs the newest frames.
func (c *checkpointer) checkpoint() (walState, error) {
	var busy int
	var s walState
	err := c.db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &s.frames, &s.checkpointed)
	return s, err
}

// close stops the goroutine, waiting for a pass under way, and closes the connection.
func (c *checkpointer) close() error {
	var err error
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		err = c.db.Close()
	})
	return err
}
