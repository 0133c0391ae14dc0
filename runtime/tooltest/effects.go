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
// before the watermark fails the suite. It is safe for concurrent use.
type Effects struct {
	mu   sync.Mutex
	list []string
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

// state adds the recorded effects to a snapshot, as "effect #N" entries.
func (e *Effects) state(into State) {
	for i, name := range e.List() {
		into[fmt.Sprintf("effect #%d", i+1)] = name
	}
}

// RoundTripper returns an http.RoundTripper that records every request ("HTTP POST
// https://host/path") as an effect before handing it to next. With next nil, no request
// leaves the process: each is answered 200 OK with an empty JSON object. Wire it into
// the tool's own http.Client (Transport) in the case's Setup.
func (e *Effects) RoundTripper(next http.RoundTripper) http.RoundTripper {
	return &recordingTransport{effects: e, next: next}
}

type recordingTransport struct {
	effects *Effects
	next    http.RoundTripper
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.effects.Record("HTTP " + req.Method + " " + req.URL.String())
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
