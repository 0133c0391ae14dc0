package device

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is a gateway's refusal of the device's credentials (401): retrying with the
// same token cannot succeed.
var ErrRefused = errors.New("the gateway refused the device's id or token")

// Dial opens the device channel: it connects to the gateway at gatewayURL (http or
// https; the path is ConnectPath unless the URL names one), authenticates as id with
// token and returns the upgraded connection, over which the gateway speaks MCP as the
// client. A 401 is ErrRefused; any other refusal is an error naming the status.
func Dial(ctx context.Context, gatewayURL, id, token string) (net.Conn, error) {
	u, err := url.Parse(gatewayURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gateway URL %q: want http://HOST:PORT or https://HOST", gatewayURL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = ConnectPath
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(IDHeader, id)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", UpgradeProtocol)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("reading the gateway's answer: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		conn.Close()
		text := strings.TrimSpace(string(body))
		if resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("%w (%s: %s)", ErrRefused, resp.Status, text)
		}
		return nil, fmt.Errorf("the gateway answered %s: %s", resp.Status, text)
	}
	if ctx.Err() != nil {
		conn.Close()
		return nil, ctx.Err()
	}
	_ = conn.SetDeadline(time.Time{})
	return &bufferedConn{Conn: conn, r: br}, nil
}

// bufferedConn reads what the response reader buffered before the connection itself.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// RunOptions configures Run.
type RunOptions struct {
	Gateway string   // the gateway's URL
	ID      string   // the device id
	Token   string   // the device's token
	Command []string // the local MCP server (stdio) and its arguments
	// Log receives one line per connection event ("connected", "connection lost;
	// reconnecting in 2s", ...).
	Log io.Writer
	// MinBackoff and MaxBackoff bound the wait before dialling again (defaults 500ms
	// and 30s); it doubles after each failure and is reset by a connection that lasted
	// a minute.
	MinBackoff, MaxBackoff time.Duration
}

// Run keeps the device connected until ctx ends: it dials the gateway, starts the local
// MCP server and copies bytes both ways, then, when either side ends, stops the server
// and dials again with backoff. Each connection gets a fresh server process, because
// the gateway starts a new MCP session (initialize) on every connection. It returns
// ErrRefused when the gateway refuses the credentials, ctx's error when ctx ends.
func Run(ctx context.Context, o RunOptions) error {
	if len(o.Command) == 0 {
		return errors.New("device: no local MCP server command")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 500 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	backoff := o.MinBackoff
	for {
		conn, err := Dial(ctx, o.Gateway, o.ID, o.Token)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrRefused):
			return err
		case err != nil:
			fmt.Fprintf(o.Log, "toolrun device: cannot connect to %s: %v; retrying in %s\n", o.Gateway, err, backoff)
		default:
			fmt.Fprintf(o.Log, "toolrun device: connected to %s as %s\n", o.Gateway, o.ID)
			start := time.Now()
			err = bridge(ctx, conn, o.Command)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Since(start) > time.Minute {
				backoff = o.MinBackoff
			}
			fmt.Fprintf(o.Log, "toolrun device: connection lost (%v); reconnecting in %s\n", err, backoff)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, o.MaxBackoff)
	}
}

// bridge runs the local server with its stdin and stdout joined to conn until one side
// ends; it then closes conn and stops the server (stdin closed, SIGTERM, SIGKILL).
func bridge(ctx context.Context, conn net.Conn, command []string) error {
	defer conn.Close()
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the local MCP server: %w", err)
	}
	done := make(chan error, 2)
	go func() {
		_, err := io.Copy(stdin, conn)
		stdin.Close()
		done <- fmt.Errorf("gateway side: %w", orEOF(err))
	}()
	go func() { _, err := io.Copy(conn, stdout); done <- fmt.Errorf("local server side: %w", orEOF(err)) }()
	var first error
	select {
	case first = <-done:
	case <-ctx.Done():
		first = ctx.Err()
	}
	conn.Close()
	stdin.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(3 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	return first
}

func orEOF(err error) error {
	if err == nil {
		return io.EOF
	}
	return err
}
