package walvfs

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// Name is the VFS's name, for a connection's DSN (file:...?vfs=toolgen-wal).
const Name = "toolgen-wal"

const (
	frameHeaderSize = 24        // a WAL frame's header (https://sqlite.org/fileformat.html#wal_file_format)
	bufferSize      = 128 << 10 // 62 frames of the store's 2 KiB pages, 31 of 4 KiB: a call's record is about 6
	openWAL         = sqlite3.SQLITE_OPEN_WAL
	sqliteOK        = sqlite3.SQLITE_OK
	stateAlign      = unsafe.Alignof(int64(0))
	stateSize       = unsafe.Sizeof(walFile{})
	ioMethodsSize   = unsafe.Sizeof(sqlite3.Tsqlite3_io_methods{})
	vfsSize         = unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})
	// what the buffer's last write leaves it waiting for
	awaitNothing    = 0
	awaitPage       = 1 // a frame's header is last: its page follows
	awaitCommitPage = 2 // a commit frame's header is last: its page follows, then the buffer is written
)

// walFile is what this VFS keeps for an open WAL file, after the unix VFS's own
// sqlite3_file in the same allocation (SQLite allocates szOsFile bytes per file). It is
// C memory, so it holds no Go pointers.
type walFile struct {
	methods uintptr // the unix VFS's io methods for the file
	buf     uintptr // bufferSize bytes of C memory, from the first frame written
	start   int64   // the file offset of buf[0]
	n       int32   // bytes in buf
	await   int32   // awaitNothing (also when buf is empty), awaitPage or awaitCommitPage
}

var (
	registerOnce sync.Once
	registerErr  error
	unix         uintptr // the unix VFS
	stateOffset  uintptr // where a file's walFile starts, after the unix VFS's file

	wrappedMu sync.Mutex
	wrapped   = map[uintptr]uintptr{} // the unix VFS's io methods -> this VFS's for a WAL file

	// For tests: writes issued to WAL files, and bytes waiting in buffers (the package
	// doc's condition: none outside a commit). An atomic add per frame, where each frame
	// saves a pwrite.
	writes, buffered atomic.Int64
)

// Register registers the VFS with SQLite (once per process; later calls return the
// first one's result). Open connections with vfs=Name after it.
func Register() error {
	registerOnce.Do(func() { registerErr = register() })
	return registerErr
}

func register() error {
	tls := libc.NewTLS()
	defer tls.Close()
	unix = sqlite3.Xsqlite3_vfs_find(tls, 0)
	if unix == 0 {
		return fmt.Errorf("walvfs: SQLite has no default VFS")
	}
	base := (*sqlite3.Tsqlite3_vfs)(ptr(unix))
	stateOffset = (uintptr(base.FszOsFile) + stateAlign - 1) &^ (stateAlign - 1)
	v := libc.Xcalloc(tls, 1, libc.Tsize_t(vfsSize))
	name, err := libc.CString(Name)
	if v == 0 || err != nil {
		return fmt.Errorf("walvfs: out of memory")
	}
	vfs := (*sqlite3.Tsqlite3_vfs)(ptr(v))
	*vfs = *base
	vfs.FpNext = 0
	vfs.FzName = name
	vfs.FszOsFile = int32(stateOffset + stateSize)
	vfs.FxOpen = cFunc(xOpen)
	vfs.FxCurrentTimeInt64 = cFunc(xCurrentTimeInt64)
	if rc := sqlite3.Xsqlite3_vfs_register(tls, v, 0); rc != sqliteOK {
		return fmt.Errorf("walvfs: sqlite3_vfs_register: code %d", rc)
	}
	return nil
}

// ptr turns an address in C memory into a pointer. Going through memory rather than
// converting the uintptr keeps vet's unsafeptr check meaningful for the rest of the
// module; C memory is outside the Go heap, so the collector has nothing to track.
func ptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// cFunc is f as SQLite's C code holds a function: the address of a Go func value, which
// modernc.org/sqlite's translated code calls through (f must be a top-level function,
// whose func value is static); goFunc is the way back.
func cFunc[F any](f F) uintptr { return *(*uintptr)(unsafe.Pointer(&f)) }

func goFunc[F any](p uintptr) F { return *(*F)(unsafe.Pointer(&p)) }

func bytesAt(p uintptr, n int32) []byte { return unsafe.Slice((*byte)(ptr(p)), n) }

func state(file uintptr) *walFile { return (*walFile)(ptr(file + stateOffset)) }

// julianUnixEpochMs is the Unix epoch as SQLite's clock counts: the Julian day number
// of 1970-01-01T00:00Z (2440587.5) in milliseconds.
const julianUnixEpochMs = 24405875 * 8640000

// xCurrentTimeInt64 is SQLite's clock ('now', unixepoch(), CURRENT_TIMESTAMP): the time
// in milliseconds since the Julian epoch, as the unix VFS gives it, from Go's clock. The
// unix VFS asks for it with a clock_gettime system call (the translated C library makes
// the call itself, without the vDSO); time.Now does not enter the kernel.
func xCurrentTimeInt64(_ *libc.TLS, _ uintptr, now uintptr) int32 {
	*(*int64)(ptr(now)) = julianUnixEpochMs + time.Now().UnixMilli()
	return sqliteOK
}

// xOpen opens every file through the unix VFS and gives a WAL file the methods below.
func xOpen(tls *libc.TLS, _ uintptr, name uintptr, file uintptr, flags int32, outFlags uintptr) int32 {
	*state(file) = walFile{}
	open := goFunc[func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32]((*sqlite3.Tsqlite3_vfs)(ptr(unix)).FxOpen)
	rc := open(tls, unix, name, file, flags, outFlags)
	f := (*sqlite3.Tsqlite3_file)(ptr(file))
	if rc != sqliteOK || flags&openWAL == 0 || f.FpMethods == 0 {
		return rc
	}
	if methods := walMethods(tls, f.FpMethods); methods != 0 { // else the file stays the unix VFS's, unbuffered
		*state(file) = walFile{methods: f.FpMethods}
		f.FpMethods = methods
	}
	return rc
}

// walMethods is the io methods table of a WAL file whose unix methods are base: base's,
// with the methods that write, or that must see what was written, replaced.
func walMethods(tls *libc.TLS, base uintptr) uintptr {
	wrappedMu.Lock()
	defer wrappedMu.Unlock()
	if m, ok := wrapped[base]; ok {
		return m
	}
	m := libc.Xmalloc(tls, libc.Tsize_t(ioMethodsSize))
	if m == 0 {
		return 0
	}
	t := (*sqlite3.Tsqlite3_io_methods)(ptr(m))
	*t = *(*sqlite3.Tsqlite3_io_methods)(ptr(base))
	t.FxClose = cFunc(xClose)
	t.FxRead = cFunc(xRead)
	t.FxWrite = cFunc(xWrite)
	t.FxTruncate = cFunc(xTruncate)
	t.FxSync = cFunc(xSync)
	t.FxFileSize = cFunc(xFileSize)
	t.FxFileControl = cFunc(xFileControl)
	wrapped[base] = m
	return m
}

// unixWrite writes through the unix VFS.
func unixWrite(tls *libc.TLS, file uintptr, s *walFile, buf uintptr, n int32, off int64) int32 {
	writes.Add(1)
	write := goFunc[func(*libc.TLS, uintptr, uintptr, int32, int64) int32]((*sqlite3.Tsqlite3_io_methods)(ptr(s.methods)).FxWrite)
	return write(tls, file, buf, n, off)
}

// flush writes the buffer, if it holds anything, and empties it whatever the outcome:
// a failed write is reported to SQLite, which rolls its commit back and writes those
// frames again, at the same offsets, in its next.
func flush(tls *libc.TLS, file uintptr, s *walFile) int32 {
	if s.n == 0 {
		return sqliteOK
	}
	n := s.n
	buffered.Add(-int64(n))
	s.n, s.await = 0, awaitNothing
	return unixWrite(tls, file, s, s.buf, n, s.start)
}

func appendBuf(tls *libc.TLS, s *walFile, data uintptr, n int32, off int64, await int32) {
	if s.n == 0 {
		s.start = off
	}
	libc.Xmemcpy(tls, s.buf+uintptr(s.n), data, libc.Tsize_t(n))
	s.n += n
	buffered.Add(int64(n))
	s.await = await
}

// xWrite gathers a commit's frames: a frame header that continues the buffer (or
// starts it, unless it is a commit frame's: a commit of one frame, or the checksum
// rewrite after a spill, which is followed by no page to wait for), and the page that
// follows a buffered header. The buffer is written after a commit frame's page.
// Anything else writes the buffer and then itself.
func xWrite(tls *libc.TLS, file uintptr, data uintptr, n int32, off int64) int32 {
	s := state(file)
	if s.n > 0 && (off != s.start+int64(s.n) || s.n+n > bufferSize) {
		if rc := flush(tls, file, s); rc != sqliteOK {
			return rc
		}
	}
	switch {
	case n == frameHeaderSize:
		commit := binary.BigEndian.Uint32(bytesAt(data+4, 4)) != 0
		if s.n == 0 && commit {
			break
		}
		if s.buf == 0 { // allocated at the first frame: a reader's WAL file never needs one
			if s.buf = libc.Xmalloc(tls, bufferSize); s.buf == 0 {
				break // out of memory: unbuffered
			}
		}
		await := int32(awaitPage)
		if commit {
			await = awaitCommitPage
		}
		appendBuf(tls, s, data, n, off, await)
		return sqliteOK
	case s.await != awaitNothing: // the page of the header the buffer ends with
		commit := s.await == awaitCommitPage
		appendBuf(tls, s, data, n, off, awaitNothing)
		if commit {
			return flush(tls, file, s)
		}
		return sqliteOK
	}
	if rc := flush(tls, file, s); rc != sqliteOK {
		return rc
	}
	return unixWrite(tls, file, s, data, n, off)
}

// flushed writes file's buffer and returns the unix VFS's methods for the file.
func flushed(tls *libc.TLS, file uintptr) (*sqlite3.Tsqlite3_io_methods, int32) {
	s := state(file)
	return (*sqlite3.Tsqlite3_io_methods)(ptr(s.methods)), flush(tls, file, s)
}

func xRead(tls *libc.TLS, file uintptr, data uintptr, n int32, off int64) int32 {
	m, rc := flushed(tls, file)
	if rc != sqliteOK {
		return rc
	}
	return goFunc[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](m.FxRead)(tls, file, data, n, off)
}

func xTruncate(tls *libc.TLS, file uintptr, size int64) int32 {
	m, rc := flushed(tls, file)
	if rc != sqliteOK {
		return rc
	}
	return goFunc[func(*libc.TLS, uintptr, int64) int32](m.FxTruncate)(tls, file, size)
}

func xSync(tls *libc.TLS, file uintptr, flags int32) int32 {
	m, rc := flushed(tls, file)
	if rc != sqliteOK {
		return rc
	}
	return goFunc[func(*libc.TLS, uintptr, int32) int32](m.FxSync)(tls, file, flags)
}

func xFileSize(tls *libc.TLS, file uintptr, size uintptr) int32 {
	m, rc := flushed(tls, file)
	if rc != sqliteOK {
		return rc
	}
	return goFunc[func(*libc.TLS, uintptr, uintptr) int32](m.FxFileSize)(tls, file, size)
}

func xFileControl(tls *libc.TLS, file uintptr, op int32, arg uintptr) int32 {
	m, rc := flushed(tls, file)
	if rc != sqliteOK {
		return rc
	}
	return goFunc[func(*libc.TLS, uintptr, int32, uintptr) int32](m.FxFileControl)(tls, file, op, arg)
}

// xClose writes the buffer, frees it and closes the file through the unix VFS, which
// expects its own methods on it.
func xClose(tls *libc.TLS, file uintptr) int32 {
	s := state(file)
	rc := flush(tls, file, s)
	libc.Xfree(tls, s.buf)
	base := s.methods
	*s = walFile{}
	(*sqlite3.Tsqlite3_file)(ptr(file)).FpMethods = base
	unixClose := goFunc[func(*libc.TLS, uintptr) int32]((*sqlite3.Tsqlite3_io_methods)(ptr(base)).FxClose)
	if crc := unixClose(tls, file); rc == sqliteOK {
		rc = crc
	}
	return rc
}
