package hostcli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/toolgen/toolgen/internal/events"
	"github.com/toolgen/toolgen/internal/textsafe"
)

// eventsFlags are events' flags: it talks to a server, not to a store, and takes none
// of the common flags.
type eventsFlags struct {
	url, session, run, tenant, tokenFile, after string
	once, json                                  bool
}

func (f *eventsFlags) bind(fs *flag.FlagSet, _ string) {
	fs.StringVar(&f.url, "url", "", "the server's URL (toolrun serve --http ADDR), e.g. http://127.0.0.1:8080")
	fs.StringVar(&f.session, "session", "", "only this session's events")
	fs.StringVar(&f.run, "run", "", "only this run's events")
	fs.StringVar(&f.tenant, "tenant", "", "only this tenant's events (a filter; with a token, the token's tenant is the only one)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token (a server with principals.yaml requires one)")
	fs.StringVar(&f.after, "after", "0", "print the events after this id (0: from the start)")
	fs.BoolVar(&f.once, "once", false, "exit when caught up instead of following")
	fs.BoolVar(&f.json, "json", false, "one JSON object per line")
}

// runEvents is toolrun events: it follows the event stream of a `toolrun serve --http`
// (GET /events) and prints one line per event, or one JSON object per line with
// --json. After a dropped connection it reconnects from the last id it printed, so it
// prints every event once. --once exits when it has caught up instead of following.
func runEvents(e *env, cmd string, args []string) int {
	var f eventsFlags
	if pos, err := e.parse(cmd, &f, args); err != nil || len(pos) > 0 {
		return usageErr(e, cmd, "takes no arguments besides flags")
	}
	if f.url == "" {
		return usageErr(e, cmd, "want --url http://ADDR of toolrun serve --http")
	}
	opts := []events.FollowOption{events.OnRetry(func(err error, wait time.Duration) {
		fmt.Fprintf(e.stderr, "%s events: %s; reconnecting in %s\n", e.name, textsafe.Text(err.Error()), wait)
	})}
	if f.tokenFile != "" {
		raw, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return fail(e, cmd, err)
		}
		opts = append(opts, events.BearerToken(strings.TrimSpace(string(raw))))
	}
	if f.once {
		// a script waits for the answer: a server that is not there is an error
		opts = append(opts, events.Once(), events.MaxRetries(5))
	}
	enc := json.NewEncoder(e.stdout)
	err := events.Follow(e.ctx, f.url, events.Filter{Tenant: f.tenant, SessionID: f.session, RunID: f.run}, f.after,
		func(ev events.Event) error {
			if f.json {
				return enc.Encode(ev)
			}
			_, err := io.WriteString(e.stdout, eventLine(ev)+"\n")
			return err
		}, opts...)
	switch {
	case errors.Is(err, events.ErrRefused):
		fmt.Fprintf(e.stderr, "%s events: %s\n", e.name, textsafe.Text(err.Error()))
		return ExitTrouble
	case err != nil && e.ctx.Err() == nil:
		return fail(e, cmd, err)
	}
	return ExitOK
}

// eventLine is an event on one line: its id and kind, then key=value for each field
// that is set, in a fixed order. Every value is escaped (textsafe.Field): the stream
// carries ids callers chose, and an event line must stay one line.
func eventLine(ev events.Event) string {
	var b strings.Builder
	b.WriteString(textsafe.Field(ev.ID) + " " + textsafe.Field(ev.Kind))
	field := func(k, v string) {
		if v != "" && v != "0" {
			b.WriteString(" " + k + "=" + textsafe.Field(v))
		}
	}
	field("invocation", strconv.FormatInt(ev.InvocationID, 10))
	field("tool", ev.Tool)
	field("status", ev.Status)
	field("reason", ev.ReasonCode)
	field("tenant", ev.Tenant)
	field("session", ev.SessionID)
	field("run", ev.RunID)
	field("step", strconv.Itoa(ev.Step))
	field("call", ev.CallID)
	field("mode", ev.Mode)
	field("decision", ev.Decision)
	field("idempotency", ev.Idempotency)
	field("origin_trust", ev.OriginTrust)
	field("argument_trust", ev.ArgumentTrust)
	field("attempt", strconv.Itoa(ev.Attempt))
	field("server", ev.Server)
	field("change", ev.Change)
	if ev.DurationUS != nil {
		field("duration", (time.Duration(*ev.DurationUS) * time.Microsecond).String())
	}
	field("at", ev.At.UTC().Format(time.RFC3339Nano))
	return b.String()
}
