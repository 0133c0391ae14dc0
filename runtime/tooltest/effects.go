package tooltest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Effects records what a tool did to the world through the test doubles the author
// wires into it: every entry counts as part of the observed state, so one recorded
// before the watermark fails the suite. Reads seen by [Effects.RoundTripper] are kept
// apart ([Effects.Reads]): looking is not an effect, and a Prepare may look. It is
// safe for concurrent use.
type Effects struct {
	mu    sync.Mutex
	list  []string
	reads []string
}

// Record notes one effect, described by name ("charge card 42", "send mail to ops").
// Call it from a double at the moment the real client would have reached the world.
func (e *Effects) Record(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, name)
}

// List returns the effects recorded so far, in order.
func (e *Effects) List() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.list...)
}

// Reads returns the requests [Effects.RoundTripper] classified as reads ("HTTP GET
// https://host/path"), in order. They are not part of the observed state.
func (e *Effects) Reads() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.reads...)
}

func (e *Effects) recordRead(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reads = append(e.reads, name)
}

// state adds the recorded effects to a snapshot, as "effect #N" entries.
func (e *Effects) state(into State) {
	for i, name := range e.List() {
		into[fmt.Sprintf("effect #%d", i+1)] = name
	}
}

// ReadMethod reports whether r uses a method HTTP defines as safe to repeat and free of
// effects on the server (RFC 9110, section 9.2.1) that a tool calls to look: GET, HEAD
// or OPTIONS. It is [Effects.RoundTripper]'s default classification, and a building
// block for a classification of your own.
func ReadMethod(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, "": // "" is GET to net/http
		return true
	}
	return false
}

// RoundTripper returns an http.RoundTripper that records every request that is not a
// read ("HTTP POST https://host/path") as an effect before handing it to next, and
// notes reads apart ([Effects.Reads]) without counting them. With no isRead, a read is
// what [ReadMethod] says (GET, HEAD, OPTIONS); with isRead, a request is a read when
// any of them says so — pass [ReadMethod] among them to keep the default, or leave it
// out when the service's GETs can act (a legacy GET /charge?...):
//
//	env.Effects.RoundTripper(nil, tooltest.ReadMethod, func(r *http.Request) bool {
//		return r.Method == http.MethodPost && r.URL.Path == "/v1/search" // a query sent as POST
//	})
//
// With next nil, no request leaves the process: each is answered 200 OK with an empty
// JSON object. Wire it into the tool's own http.Client (Transport) in the case's Setup.
func (e *Effects) RoundTripper(next http.RoundTripper, isRead ...func(*http.Request) bool) http.RoundTripper {
	if len(isRead) == 0 {
		isRead = []func(*http.Request) bool{ReadMethod}
	}
	return &recordingTransport{effects: e, next: next, isRead: isRead}
}

type recordingTransport struct {
	effects *Effects
	next    http.RoundTripper
	isRead  []func(*http.Request) bool
}

func (rt *recordingTransport) read(req *http.Request) bool {
	for _, f := range rt.isRead {
		if f(req) {
			return true
		}
	}
	return false
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	name := "HTTP " + method + " " + req.URL.String()
	if rt.read(req) {
		rt.effects.recordRead(name)
	} else {
		rt.effects.Record(name)
	}
	if rt.next != nil {
		return rt.next.RoundTrip(req)
	}
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		Status:     "200 OK",
		StatusCode: http.StatusOK,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     http.Header{"Content-Type": []string{"application/json"}},
		Body:       io.NopCloser(bytes.NewReader([]byte("{}"))),
		Request:    req,
	}, nil
}
