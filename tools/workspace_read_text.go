package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/toolgen/toolgen/gen"
	"github.com/toolgen/toolgen/runtime"
)

// Failure codes of workspace.read_text besides the shared workspace ones.
const (
	codeNotText       = "not_text"       // invalid UTF-8 or NUL bytes: a binary file
	codeInvalidOffset = "invalid_offset" // past the end, or inside a UTF-8 character
)

// workspaceReadText implements workspace.read_text (idempotent: it only reads).
type workspaceReadText struct{}

func (workspaceReadText) Run(ctx context.Context, tc *runtime.ExecContext, args gen.WorkspaceReadTextArgs) (gen.WorkspaceReadTextResult, error) {
	var res gen.WorkspaceReadTextResult
	if args.Offset < 0 || args.MaxBytes < utf8.UTFMax {
		// The schema says as much; the check keeps a direct call from panicking.
		return res, runtime.Failf(codeInvalidOffset, "offset must be at least 0 and max_bytes at least %d", utf8.UTFMax)
	}
	ws, rp, err := resolveExisting(tc, args.Path)
	if err != nil {
		return res, err
	}
	r, err := ws.openRoot()
	if err != nil {
		return res, err
	}
	defer r.Close()
	f, _, err := openRegular(r, rp.rel, args.Path)
	if err != nil {
		var tf *runtime.ToolFailure
		if errors.As(err, &tf) && tf.Code == codeIsDirectory {
			return res, runtime.Failf(codeIsDirectory, "%s is a directory; use workspace.list", args.Path)
		}
		return res, err
	}
	defer f.Close()

	// One pass hashes the whole file and keeps the requested window (plus one byte, to
	// learn whether the file goes on), so the digest and the text describe the same bytes
	// even if the file is replaced meanwhile. The same pass checks that the whole file is
	// text: a binary file (a SQLite database, say) is refused as a whole, whatever the
	// window, or it could be read window by window through its text-looking stretches.
	h := sha256.New()
	win := &windowWriter{skip: args.Offset, keep: args.MaxBytes + 1}
	check := &textCheck{}
	size, err := io.Copy(io.MultiWriter(check, h, win), readerCtx{ctx, f})
	if err == nil {
		err = check.finish()
	}
	if errors.Is(err, errNotText) {
		return res, runtime.Failf(codeNotText, "%s is not UTF-8 text (it holds invalid UTF-8 or NUL bytes)", args.Path)
	}
	if err != nil {
		return res, fmt.Errorf("read %s: %w", rp.rel, err)
	}
	if args.Offset > size {
		return res, runtime.Failf(codeInvalidOffset, "offset %d is past the end of %s (%d bytes)", args.Offset, args.Path, size)
	}
	text := win.buf
	truncated := int64(len(text)) > args.MaxBytes
	if truncated {
		text = trimPartialRune(text[:args.MaxBytes])
	}
	if len(text) > 0 && !utf8.RuneStart(text[0]) {
		return res, runtime.Failf(codeInvalidOffset, "offset %d of %s falls inside a UTF-8 character; start at a character boundary such as a previous next_offset", args.Offset, args.Path)
	}
	// The whole file is valid, so is a window cut at character boundaries; checked
	// again all the same, as the text returned must be text whatever happened above.
	if !utf8.Valid(text) || bytes.IndexByte(text, 0) >= 0 {
		return res, runtime.Failf(codeNotText, "%s is not UTF-8 text (it holds invalid UTF-8 or NUL bytes)", args.Path)
	}
	res.Text = string(text)
	res.Size = size
	res.Sha256 = hex.EncodeToString(h.Sum(nil))
	res.NextOffset = args.Offset + int64(len(text))
	res.Truncated = res.NextOffset < size
	return res, nil
}

// windowWriter keeps at most keep bytes after skipping the first skip bytes written.
type windowWriter struct {
	skip, keep int64
	buf        []byte
}

func (w *windowWriter) Write(p []byte) (int, error) {
	n := len(p)
	if w.skip >= int64(len(p)) {
		w.skip -= int64(len(p))
		return n, nil
	}
	p = p[w.skip:]
	w.skip = 0
	if room := w.keep - int64(len(w.buf)); room < int64(len(p)) {
		p = p[:max(room, 0)]
	}
	w.buf = append(w.buf, p...)
	return n, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b, so a window that
// stops inside a character ends before it (max_bytes is at least 4, so a window always
// keeps one whole character).
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// errNotText stops the copy of a file that is not text.
var errNotText = errors.New("not UTF-8 text")

// textCheck is a writer that fails with errNotText at the first NUL byte or invalid
// UTF-8 sequence of the stream written to it, however the stream is split into writes:
// a sequence cut by a write boundary is carried to the next write (io.Copy writes 32 KiB
// at a time, and a character straddling two chunks is valid). finish reports a stream
// that ends inside a sequence.
type textCheck struct {
	pending []byte // an incomplete sequence at the end of the previous write
}

func (c *textCheck) Write(p []byte) (int, error) {
	n := len(p)
	if bytes.IndexByte(p, 0) >= 0 {
		return 0, errNotText
	}
	if len(c.pending) > 0 {
		// Complete the carried sequence with the first bytes of p.
		k := min(len(p), utf8.UTFMax-len(c.pending))
		buf := append(c.pending, p[:k]...)
		if !utf8.FullRune(buf) { // p was too short to complete it: carry on
			c.pending = buf
			return n, nil
		}
		r, size := utf8.DecodeRune(buf)
		if r == utf8.RuneError && size == 1 {
			return 0, errNotText
		}
		p = p[size-len(c.pending):]
		c.pending = c.pending[:0]
	}
	body := trimPartialRune(p)
	if !utf8.Valid(body) {
		return 0, errNotText
	}
	c.pending = append(c.pending, p[len(body):]...)
	return n, nil
}

// finish fails when the stream ended inside a UTF-8 sequence.
func (c *textCheck) finish() error {
	if len(c.pending) > 0 {
		return errNotText
	}
	return nil
}

// readerCtx stops a long read when the call is cancelled.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
