package upstream_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/mcp/upstream"
	"github.com/toolgen/toolgen/model"
)

// TestHTTPResponseBounded: the go-sdk reads a JSON response body whole, without a bound;
// the adapter caps it at MaxMessageBytes, so a server answering with an endless body
// fails the request instead of exhausting memory.
func TestHTTPResponseBounded(t *testing.T) {
	huge := strings.Repeat("x", 2<<20)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"padding":"` + huge + `"}}`))
	}))
	defer ts.Close()
	e := newEnv(t)
	s := server("bloated", "read", "idempotent", "low")
	s.HTTP = &model.HTTPTransport{URL: ts.URL + "/mcp"}
	_, err := upstream.Connect(e.ctx, upstream.Options{Server: s, Registry: e.reg, Store: e.store, MaxMessageBytes: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "maximum message size") {
		t.Fatalf("Connect to a server with a 2 MiB answer and a 1 MiB bound = %v", err)
	}
}
