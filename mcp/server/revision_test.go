package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// withRevision probes the SDK once per revision and answers later requests from
// what the probe derived; the request keeps its own cancellation and values, and the
// revisions kept are bounded whatever a client sends.
func TestWithRevision_ProbedOncePerRevision(t *testing.T) {
	h := &sessionHandler{}
	const rev = "2099-01-01-probe-test" // after 2026-07-28: the SDK takes any such value
	type reqKey struct{}
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), reqKey{}, "mine"))
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", http.NoBody)
	req.Header.Set(headerProtocolVersion, rev)

	first := h.withRevision(req)
	kept, ok := revisionValues.Load(rev)
	if !ok {
		t.Fatal("the probe's context was not kept")
	}
	second := h.withRevision(req)
	if again, _ := revisionValues.Load(rev); again != kept {
		t.Fatal("the revision was probed again")
	}
	for _, r := range []*http.Request{first, second} {
		rc, ok := r.Context().(revisionContext)
		if !ok || rc.values != kept {
			t.Fatalf("context %T does not answer from the kept probe", r.Context())
		}
		if r.Context().Value(reqKey{}) != "mine" {
			t.Fatal("the request's own value is lost")
		}
	}
	cancel()
	<-first.Context().Done() // the request's cancellation reaches the SDK

	if got := h.withRevision(httptest.NewRequest(http.MethodPost, "/mcp", http.NoBody)); got.Context() == first.Context() {
		t.Fatal("a request without the header got a revision")
	}
	for i := range 2 * maxKeptRevisions {
		r := httptest.NewRequest(http.MethodPost, "/mcp", http.NoBody)
		r.Header.Set(headerProtocolVersion, "2099-02-"+strconv.Itoa(i))
		h.withRevision(r)
	}
	n := 0
	revisionValues.Range(func(any, any) bool { n++; return true })
	if n > maxKeptRevisions {
		t.Fatalf("%d revisions kept, at most %d", n, maxKeptRevisions)
	}
}
