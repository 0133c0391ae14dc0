// Package walvfs is a SQLite VFS that writes a commit's WAL frames to the WAL file in
// one write instead of two per frame, and reads the clock without a system call.
//
// Why: SQLite appends each frame of a commit with two writes, its 24-byte header and
// then its page, so a call's record (about eight pages: the row, its indexes, its
// events) costs some sixteen pwrite calls. In a profile of toolrun serving read calls
// those writes were 5 % of the process at one caller and 7 % at four (BENCHMARKS.md,
// issue 20), nearly all of it the system calls themselves.
//
// The VFS is the default (unix) VFS with the WAL file's write path wrapped: frames
// appended one after another are gathered in a buffer of the file's own, and the
// buffer is written, in one pwrite at the offsets SQLite chose, when the commit frame
// (a frame header whose database size is not zero) has been appended with its page.
// That is before SQLite publishes the commit in the WAL index, so no reader, of this
// process or another, can look for a frame that is still in the buffer; when SQLite
// goes on to sync the WAL (synchronous=FULL) the frames are already in the file. Any
// other operation on the WAL file (a read, a sync, a truncation, its size, a file
// control, its close, a write that does not continue the buffer) writes the buffer
// first, so the file is always what SQLite believes it wrote. A commit whose buffered
// write fails returns the error from its commit frame's write, and SQLite rolls the
// commit back, as it would have on the failed write of any frame. The main database
// file and the journals are the unix VFS's, untouched.
//
// One condition, which the caller sets: every connection writing through this VFS
// must run with PRAGMA cache_spill=0. A spill writes a frame of an unfinished
// transaction; if the transaction then rolled back, its frame could wait in the
// buffer until another connection had committed frames at the same offsets, and
// overwrite them. With spilling off a transaction writes no frame before its commit,
// so the buffer is empty whenever SQLite is not inside a commit.
//
// The VFS also answers SQLite's clock ('now' in unixepoch(), datetime() and the like)
// from Go's time.Now, on the same scale as the unix VFS (milliseconds since the Julian
// epoch). The unix VFS makes a gettimeofday system call for it, which the translated C
// library issues itself, without the vDSO Go uses: 2.7 µs per statement that reads the
// time on this project's VMs (BenchmarkClock), and every write of a call reads it.
//
// It must never import the rest of the module: it knows SQLite's VFS and its WAL
// format, nothing about calls or stores.
package walvfs
