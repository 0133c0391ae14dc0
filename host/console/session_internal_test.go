package console

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime"
)

// request is a request to host on loopback, carrying the cookies of rec.
func request(host string, rec *httptest.ResponseRecorder) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://"+host+"/console/held", nil)
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}))
	if rec != nil {
		for _, c := range rec.Result().Cookies() {
			r.AddCookie(c)
		}
	}
	return r
}

// TestSessionsAreBoundedAndExpire: at most max sessions, the least recently used out
// first; a session unused for the idle time, or past its lifetime, is gone; a session
// works on its own Host only.
func TestSessionsAreBoundedAndExpire(t *testing.T) {
	ss := newSessions(2, time.Hour, 12*time.Hour)
	p := runtime.Principal{ID: "rita", Tenant: "acme"}
	var recs []*httptest.ResponseRecorder
	for range 3 {
		rec := httptest.NewRecorder()
		ss.create(rec, request("console.test", nil), p, "token", time.Time{})
		recs = append(recs, rec)
	}
	if ss.fromRequest(request("console.test", recs[0])) != nil {
		t.Error("the first of three sessions outlived a bound of two")
	}
	s := ss.fromRequest(request("console.test", recs[1]))
	if s == nil || ss.fromRequest(request("console.test", recs[2])) == nil {
		t.Fatal("the two latest sessions are gone")
	}
	if ss.fromRequest(request("other.test", recs[1])) != nil {
		t.Error("a session worked on another Host")
	}
	s.mu.Lock()
	s.lastSeen = time.Now().Add(-2 * time.Hour)
	s.mu.Unlock()
	if ss.fromRequest(request("console.test", recs[1])) != nil {
		t.Error("an idle session outlived its idle time")
	}
	s = ss.fromRequest(request("console.test", recs[2]))
	s.expires = time.Now().Add(-time.Second)
	if ss.fromRequest(request("console.test", recs[2])) != nil {
		t.Error("a session outlived its lifetime")
	}
	// An ID token that expires first ends the session then.
	rec := httptest.NewRecorder()
	exp := time.Now().Add(time.Minute)
	if s := ss.create(rec, request("console.test", nil), p, "login", exp); !s.expires.Equal(exp) {
		t.Errorf("a session of an ID token expiring at %s ends at %s", exp, s.expires)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/console/held":             "/console/held",
		"/console/audit?session=s1": "/console/audit?session=s1",
		"//evil.example/console/":   "",
		"https://evil.example/":     "",
		"/console/\\evil":           "",
		"/other":                    "",
		"/console":                  "",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}
