package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// storedFiles lists the regular files under dir, relative to it.
func storedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readArtifact(t *testing.T, w *FSArtifactWriter, uri string) []byte {
	t.Helper()
	rc, err := w.Open(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFSArtifactWriter_ContentAddressed(t *testing.T) {
	root := t.TempDir()
	w := NewFSArtifactWriter(root)
	data := []byte("hello, artifact\n")
	sum := sha256Hex(data)

	ref, err := w.WriteArtifact(context.Background(), "text/plain", strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	want := ArtifactRef{URI: "artifact:sha256:" + sum, SHA256: sum, Size: int64(len(data)), MediaType: "text/plain"}
	if ref != want {
		t.Fatalf("ref = %+v, want %+v", ref, want)
	}
	if got := storedFiles(t, root); len(got) != 1 || got[0] != filepath.Join("sha256", sum[:2], sum[2:]) {
		t.Fatalf("stored files = %v", got)
	}
	if got := readArtifact(t, w, ref.URI); string(got) != string(data) {
		t.Fatalf("Open = %q", got)
	}
}

func TestFSArtifactWriter_IdenticalContentIsStoredOnce(t *testing.T) {
	root := t.TempDir()
	w := NewFSArtifactWriter(root)
	a, err := w.WriteArtifact(context.Background(), "text/plain", strings.NewReader("same bytes"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.WriteArtifact(context.Background(), "application/octet-stream", strings.NewReader("same bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if a.URI != b.URI || a.SHA256 != b.SHA256 || a.Size != b.Size || b.MediaType != "application/octet-stream" {
		t.Fatalf("refs %+v and %+v", a, b)
	}
	c, err := w.WriteArtifact(context.Background(), "text/plain", strings.NewReader("other bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if c.URI == a.URI {
		t.Fatal("different content, same URI")
	}
	if got := storedFiles(t, root); len(got) != 2 {
		t.Fatalf("stored files = %v, want 2 (no temporaries left)", got)
	}
}

func TestFSArtifactWriter_ConcurrentWritersOfOneContent(t *testing.T) {
	root := t.TempDir()
	w := NewFSArtifactWriter(root)
	data := strings.Repeat("concurrent ", 10000)
	var wg sync.WaitGroup
	refs := make([]ArtifactRef, 8)
	errs := make([]error, 8)
	for i := range refs {
		wg.Go(func() {
			refs[i], errs[i] = NewFSArtifactWriter(root).WriteArtifact(context.Background(), "text/plain", strings.NewReader(data))
		})
	}
	wg.Wait()
	for i := range refs {
		if errs[i] != nil || refs[i] != refs[0] {
			t.Fatalf("writer %d: %+v, %v", i, refs[i], errs[i])
		}
	}
	if got := storedFiles(t, root); len(got) != 1 {
		t.Fatalf("stored files = %v", got)
	}
	if got := readArtifact(t, w, refs[0].URI); string(got) != data {
		t.Fatal("content differs")
	}
}

func TestFSArtifactWriter_OpenRefusesOtherURIs(t *testing.T) {
	root := t.TempDir()
	w := NewFSArtifactWriter(root)
	hex64 := strings.Repeat("ab", 32)
	for _, uri := range []string{
		"",
		"artifact:sha256:",
		"artifact:sha256:" + strings.ToUpper(hex64),
		"artifact:sha256:" + hex64[:63],
		"artifact:sha256:" + hex64 + "0",
		"artifact:sha256:" + hex64 + "\n",
		"artifact:sha256:../../../../etc/passwd",
		"artifact:sha1:" + hex64[:40],
		"file://" + filepath.Join(root, "sha256", hex64[:2], hex64[2:]),
		filepath.Join(root, "sha256", hex64[:2], hex64[2:]),
	} {
		if _, err := w.Open(uri); !errors.Is(err, ErrInvalidArtifactURI) {
			t.Errorf("Open(%q) err = %v, want ErrInvalidArtifactURI", uri, err)
		}
	}
	if _, err := w.Open("artifact:sha256:" + hex64); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) err = %v, want fs.ErrNotExist", err)
	}
}

// patternReader yields n bytes of a repeating pattern without holding them.
type patternReader struct {
	n   int64
	off int64
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	if rem := r.n - r.off; int64(len(p)) > rem {
		p = p[:rem]
	}
	for i := range p {
		p[i] = byte((r.off + int64(i)) * 7 % 251)
	}
	r.off += int64(len(p))
	return len(p), nil
}

func TestFSArtifactWriter_StreamsLargeInput(t *testing.T) {
	const size = 64 << 20
	h := sha256.New()
	if _, err := io.Copy(h, &patternReader{n: size}); err != nil {
		t.Fatal(err)
	}
	wantSum := hex.EncodeToString(h.Sum(nil))

	w := NewFSArtifactWriter(t.TempDir())
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	ref, err := w.WriteArtifact(context.Background(), "application/octet-stream", &patternReader{n: size})
	goruntime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if ref.SHA256 != wantSum || ref.Size != size {
		t.Fatalf("ref = %+v, want sha256 %s size %d", ref, wantSum, size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Fatalf("writing %d bytes allocated %d bytes: the writer buffers instead of streaming", size, alloc)
	}
	rc, err := w.Open(ref.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	h.Reset()
	if n, err := io.Copy(h, rc); err != nil || n != size || hex.EncodeToString(h.Sum(nil)) != wantSum {
		t.Fatalf("read back %d bytes, %v", n, err)
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestFSArtifactWriter_FailureLeavesNothing(t *testing.T) {
	root := t.TempDir()
	w := NewFSArtifactWriter(root)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.WriteArtifact(ctx, "text/plain", strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: err = %v", err)
	}
	boom := errors.New("read failed")
	if _, err := w.WriteArtifact(context.Background(), "text/plain", io.MultiReader(strings.NewReader("partial"), failingReader{boom})); !errors.Is(err, boom) {
		t.Fatalf("reader error: err = %v", err)
	}
	if got := storedFiles(t, root); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}
}

func TestFSArtifactWriter_ReplacesATruncatedFile(t *testing.T) {
	root := t.TempDir()
	w := NewFSArtifactWriter(root)
	data := "complete content"
	sum := sha256Hex([]byte(data))
	p := filepath.Join(root, "sha256", sum[:2], sum[2:])
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("compl"), 0o600); err != nil {
		t.Fatal(err)
	}
	ref, err := w.WriteArtifact(context.Background(), "text/plain", strings.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if got := readArtifact(t, w, ref.URI); string(got) != data {
		t.Fatalf("content = %q", got)
	}
}
