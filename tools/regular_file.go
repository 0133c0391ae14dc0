package tools

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/toolgen/toolgen/runtime"
)

// openRegular opens rel under r for reading, and only if it is a regular file: a
// directory is refused with is_directory, anything else that is not a regular file (a
// FIFO, a socket, a device) with not_regular_file. shown is the caller's spelling of the
// path, for the failure messages. When the file does not exist the error satisfies
// errors.Is(err, fs.ErrNotExist).
//
// Why the three steps (issue 14, finding 13): open(2) of a FIFO blocks until a writer
// appears, inside the system call, where no context deadline can interrupt it; a
// device may act on being opened. So the file is judged by a stat before it is opened;
// and since it can be swapped for a FIFO between the stat and the open, the open is
// non-blocking (O_NONBLOCK makes open(2) of a FIFO return at once) and the opened file
// is judged again with fstat, which is what the caller then reads. On a regular file
// O_NONBLOCK changes nothing.
func openRegular(r *os.Root, rel, shown string) (*os.File, fs.FileInfo, error) {
	fi, err := r.Stat(rel)
	if err != nil {
		return nil, nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	if err := regularOnly(fi, shown); err != nil {
		return nil, nil, err
	}
	return openChecked(r, rel, shown)
}

// openChecked is openRegular without the first stat: the non-blocking open and the
// fstat, which alone must never block, whatever rel is by then.
func openChecked(r *os.Root, rel, shown string) (*os.File, fs.FileInfo, error) {
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", rel, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", rel, err)
	}
	if err := regularOnly(fi, shown); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// regularOnly refuses a FileInfo that is not a regular file.
func regularOnly(fi fs.FileInfo, shown string) error {
	switch {
	case fi.IsDir():
		return runtime.Failf(codeIsDirectory, "%s is a directory", shown)
	case !fi.Mode().IsRegular():
		return runtime.Failf(codeNotRegularFile, "%s is not a regular file (a device, socket or named pipe)", shown)
	}
	return nil
}
