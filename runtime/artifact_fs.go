package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ArtifactURIPrefix starts every URI an [FSArtifactWriter] returns: "artifact:sha256:" and
// then the 64 lower-case hex digits of the content's SHA-256.
const ArtifactURIPrefix = "artifact:sha256:"

// ErrInvalidArtifactURI is returned by [FSArtifactWriter.Open] for a URI that is not
// "artifact:sha256:" followed by 64 lower-case hex digits.
var ErrInvalidArtifactURI = errors.New("runtime: invalid artifact URI")

var artifactURIRE = regexp.MustCompile(`^artifact:sha256:([0-9a-f]{64})$`)

// FSArtifactWriter is a content-addressed [ArtifactWriter] on the local filesystem (RT-9).
//
// Content with SHA-256 h (hex) lives at root/sha256/h[:2]/h[2:], read-only. A write
// streams into a temporary file under root/tmp while hashing, so its memory use does not
// grow with the content; it fsyncs the file, renames it into place and fsyncs the
// directory, so a returned ref names content that survives a crash. Writing content that
// is already stored (same hash, same size) reuses the stored file. Several writers, in
// one process or several, may share a root: renames of identical content are idempotent.
//
// The media type is not stored: it belongs to the [ArtifactRef], so one file can be
// referred to under several media types.
type FSArtifactWriter struct {
	root string
}

var _ ArtifactWriter = (*FSArtifactWriter)(nil)

// NewFSArtifactWriter returns a writer storing under root, which is created on first write.
func NewFSArtifactWriter(root string) *FSArtifactWriter { return &FSArtifactWriter{root: root} }

// Root is the directory the writer stores under.
func (w *FSArtifactWriter) Root() string { return w.root }

// WriteArtifact stores everything r yields and returns its ref. It stops, leaving nothing
// behind, when ctx is canceled or r fails.
func (w *FSArtifactWriter) WriteArtifact(ctx context.Context, mediaType string, r io.Reader) (ref ArtifactRef, err error) {
	tmpDir := filepath.Join(w.root, "tmp")
	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		return ArtifactRef{}, fmt.Errorf("runtime: write artifact: %w", err)
	}
	tmp, err := os.CreateTemp(tmpDir, "artifact-*")
	if err != nil {
		return ArtifactRef{}, fmt.Errorf("runtime: write artifact: %w", err)
	}
	placed := false
	defer func() {
		if !placed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()

	h := sha256.New()
	size, err := io.Copy(io.MultiWriter(tmp, h), &ctxReader{ctx: ctx, r: r})
	if err != nil {
		return ArtifactRef{}, fmt.Errorf("runtime: write artifact: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return ArtifactRef{}, fmt.Errorf("runtime: write artifact: sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return ArtifactRef{}, fmt.Errorf("runtime: write artifact: %w", err)
	}
	sum := hexSum(h)
	ref = ArtifactRef{URI: ArtifactURIPrefix + sum, SHA256: sum, Size: size, MediaType: mediaType}

	dst := w.path(sum)
	if fi, err := os.Stat(dst); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
		os.Remove(tmp.Name())
		placed = true
		return ref, nil
	}
	if err := ctx.Err(); err != nil {
		return ArtifactRef{}, fmt.Errorf("runtime: write artifact: %w", err)
	}
	dir := filepath.Dir(dst)
	_, statErr := os.Stat(dir)
	newDir := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ArtifactRef{}, fmt.Errorf("runtime: write artifact: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o400); err != nil {
		return ArtifactRef{}, fmt.Errorf("runtime: write artifact: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return ArtifactRef{}, fmt.Errorf("runtime: write artifact: %w", err)
	}
	placed = true
	// Make the rename durable, and the new fan-out directory's own entry when it is new.
	syncs := []string{dir}
	if newDir {
		syncs = append(syncs, filepath.Dir(dir))
	}
	for _, d := range syncs {
		if err := syncDir(d); err != nil {
			return ArtifactRef{}, fmt.Errorf("runtime: write artifact: sync %s: %w", d, err)
		}
	}
	return ref, nil
}

// Open returns the content an artifact URI names. It refuses any URI that is not of the
// form this writer returns, so a URI can never name a path outside the store.
func (w *FSArtifactWriter) Open(uri string) (io.ReadCloser, error) {
	m := artifactURIRE.FindStringSubmatch(uri)
	if m == nil {
		return nil, fmt.Errorf("%w: %q", ErrInvalidArtifactURI, uri)
	}
	f, err := os.Open(w.path(m[1]))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("runtime: artifact %s: %w", uri, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("runtime: open artifact: %w", err)
	}
	return f, nil
}

func (w *FSArtifactWriter) path(sum string) string {
	return filepath.Join(w.root, "sha256", sum[:2], sum[2:])
}

func hexSum(h hash.Hash) string { return strings.ToLower(hex.EncodeToString(h.Sum(nil))) }

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}

// ctxReader stops a copy when its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
