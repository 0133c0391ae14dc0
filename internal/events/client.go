package events

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ErrRefused wraps the error of a request the server refused (a 4xx status): a retry
// with the same id and filters would be refused again.
var ErrRefused = errors.New("events: refused")

// FollowOption configures [Follow].
type FollowOption func(*follow)

type follow struct {
	once       bool
	client     *http.Client
	retry      func(err error, wait time.Duration)
	maxRetries int
	minBackoff time.Duration
	maxBackoff time.Duration
	idle       time.Duration
	token      string
}

// Once makes Follow return nil once it has received every event the server could read
// when it caught up, instead of following new ones.
func Once() FollowOption { return func(f *follow) { f.once = true } }

// WithClient makes Follow use c (default: a client without a timeout; the stream is long).
func WithClient(c *http.Client) FollowOption { return func(f *follow) { f.client = c } }

// BearerToken authenticates every request with token (a server with principals.yaml
// serves each caller its own tenant's events only).
func BearerToken(token string) FollowOption { return func(f *follow) { f.token = token } }

// OnRetry is called before each reconnection with the reason and the wait.
func OnRetry(fn func(err error, wait time.Duration)) FollowOption {
	return func(f *follow) { f.retry = fn }
}

// MaxRetries makes Follow give up after n consecutive connections that failed without
// receiving anything (default 0: never give up).
func MaxRetries(n int) FollowOption { return func(f *follow) { f.maxRetries = n } }

// Backoff sets the first and the longest wait between reconnections (default 250ms, 10s).
func Backoff(first, longest time.Duration) FollowOption {
	return func(f *follow) { f.minBackoff, f.maxBackoff = first, longest }
}

// IdleTimeout is how long a connection may stay silent before Follow drops it and
// reconnects (default three heartbeats): a connection that died without a reset.
func IdleTimeout(d time.Duration) FollowOption { return func(f *follow) { f.idle = d } }

// Follow reads the event stream at rawURL (the server's base URL, or the stream's own
// URL ending in Path) with filter f, after lastID ("" or "0": from the start), and
// calls fn for each event in stream order. After a dropped connection, or a stream the
// server ended, it reconnects with Last-Event-ID set to the last id received, so fn
// sees every event exactly once. It returns fn's error, a refusal (ErrRefused), the
// last connection error once MaxRetries is exceeded, ctx.Err() when ctx ends, or nil
// when Once and caught up.
func Follow(ctx context.Context, rawURL string, f Filter, lastID string, fn func(Event) error, opts ...FollowOption) error {
	o := follow{client: &http.Client{}, minBackoff: 250 * time.Millisecond, maxBackoff: 10 * time.Second, idle: 3 * DefaultHeartbeat}
	for _, opt := range opts {
		opt(&o)
	}
	u, err := streamURL(rawURL, f, o.once)
	if err != nil {
		return err
	}
	wait, failures := o.minBackoff, 0
	for {
		got, caughtUp, err := o.connect(ctx, u, &lastID, fn)
		var stop stopError
		switch {
		case err == nil && caughtUp:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &stop):
			return stop.err
		}
		if err == nil {
			err = errors.New("the server ended the stream")
		}
		if got > 0 {
			wait, failures = o.minBackoff, 0
		} else if failures++; o.maxRetries > 0 && failures > o.maxRetries {
			return fmt.Errorf("events: giving up after %d attempts: %w", failures, err)
		}
		if o.retry != nil {
			o.retry(err, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, o.maxBackoff)
	}
}

// stopError ends Follow with err: fn's error, or a refusal a retry would meet again.
type stopError struct{ err error }

func (e stopError) Error() string { return e.err.Error() }

// streamURL is rawURL with Path (if it has no path) and the filter's query parameters.
func streamURL(rawURL string, f Filter, once bool) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("events: %q: want the server's URL, http://HOST:PORT", rawURL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = Path
	}
	q := u.Query()
	for k, v := range map[string]string{"tenant": f.Tenant, "session": f.SessionID, "run": f.RunID} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if once {
		q.Set("once", "1")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// connect reads one connection: the number of events it delivered, whether it ended
// caught up (Once), and why it ended otherwise. *lastID follows the events delivered.
func (o *follow) connect(ctx context.Context, u string, lastID *string, fn func(Event) error) (int, bool, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, false, stopError{err}
	}
	req.Header.Set("Accept", "text/event-stream")
	if o.token != "" {
		req.Header.Set("Authorization", "Bearer "+o.token)
	}
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		msg := strings.TrimSpace(string(raw))
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return 0, false, stopError{fmt.Errorf("%w: %s: %s", ErrRefused, resp.Status, msg)}
		}
		return 0, false, fmt.Errorf("events: %s: %s", resp.Status, msg)
	}
	idle := time.AfterFunc(o.idle, func() { cancel(errors.New("the connection was silent too long")) })
	defer idle.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var id, kind, data string
	got := 0
	for sc.Scan() {
		idle.Reset(o.idle)
		line := sc.Text()
		if line == "" { // dispatch
			if data != "" {
				var ev Event
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					return got, false, fmt.Errorf("events: event %s: %w", id, err)
				}
				if ev.Kind == "" {
					ev.Kind = kind
				}
				if ev.ID == "" {
					ev.ID = id
				}
				if err := fn(ev); err != nil {
					return got, false, stopError{err}
				}
				got++
				if id != "" {
					*lastID = id
				}
			}
			id, kind, data = "", "", ""
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "": // a comment
			if o.once && value == CaughtUpComment {
				return got, true, nil
			}
		case "id":
			id = value
		case "event":
			kind = value
		case "data":
			if data != "" {
				data += "\n"
			}
			data += value
		}
	}
	err = sc.Err()
	if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil && err != nil {
		err = cause
	}
	return got, false, err
}
