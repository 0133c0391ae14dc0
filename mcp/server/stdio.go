package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioConn is the mcp.Connection of ServeStdio: newline-delimited JSON-RPC on a
// reader and a writer, as the SDK's mcp.IOTransport, with what a stdio server needs
// and the SDK's transport lacks (go-sdk v1.8.0; each is worth reporting upstream):
//
//   - Bad input never ends the connection. The SDK's transport ends it at the first
//     frame it cannot decode (invalid JSON, JSON that is not JSON-RPC, a frame over
//     its size limit) and at a batch once 2025-06-18 or later was negotiated: for a
//     stdio server, one bad line ends the process's only session. Here every such
//     line is answered with a JSON-RPC error (-32700 for invalid JSON, -32600
//     otherwise; the id when one can be read, else null) and reading goes on. Blank
//     lines are skipped.
//   - Batches follow the negotiated revision. Up to 2025-03-26 JSON-RPC batches are
//     part of MCP: a batch line is served element by element and answered with one
//     array of the responses to its requests (an invalid element is answered inside
//     the array). From 2025-06-18 on they are not, nor before a revision was
//     negotiated (2026-07-28 negotiates none on the connection): no element of the
//     batch runs, each request in it is answered -32600 with its own id, so that no
//     client waits for an answer that will never come, and a batch holding no request
//     with an id is answered once, -32600 with a null id.
//   - A request reusing the id of a request still in flight is answered -32600, as the
//     SDK's HTTP transport does. The SDK's jsonrpc2 layer detects it but clears the id
//     before answering, so the client is never answered (upstream: answer with the
//     id, or at least a null id).
//   - After notifications/cancelled for a request in flight, no response to it is sent
//     (MCP: the receiver SHOULD NOT respond). The SDK cancels the handler's context
//     but still writes whatever the handler returns, and clients log "a response for
//     an unknown message ID". What the pipeline records for the call stays as it is.
//   - Error codes. The SDK answers a request before initialize with error code 0,
//     which is no JSON-RPC code (ServerSession.handle returns a plain Go error, and
//     plain errors keep no code; upstream: -32600). Here a code-0 error is answered
//     -32600 before initialize, -32603 otherwise, with the SDK's message.
type stdioConn struct {
	log   *slog.Logger
	limit int
	in    io.Reader // closed by Close when it is an io.Closer
	out   *lockedWriter
	lines chan stdioLine
	// inputEnded is called when the input ends: it ends the connection's Serve (which
	// cancels its calls, waits for the answers and closes).
	inputEnded func()

	// Read is called by one goroutine at a time: queue and readErr are its own.
	queue   []jsonrpc.Message // the accepted rest of a batch, read before the next line
	readErr error             // the input's error, returned once the line before it was read

	mu          sync.Mutex
	inflight    map[jsonrpc.ID]*stdioCall
	initID      jsonrpc.ID    // the initialize request in flight, if any
	initDone    chan struct{} // closed when its response is written (nil: none in flight)
	initialized bool          // an initialize succeeded
	version     string        // the revision it negotiated
	idle        []chan struct{}

	closeOnce sync.Once
	closed    chan struct{}
}

// stdioCall is a request read and not yet answered.
type stdioCall struct {
	method    string
	cancelled bool
	batch     *stdioBatch // the batch it came in, or nil
}

// stdioBatch collects the responses to one batch line (revisions up to 2025-03-26).
type stdioBatch struct {
	pending int               // requests of the batch not answered yet
	replies []json.RawMessage // the responses so far, encoded
}

type stdioLine struct {
	data    []byte
	tooLong bool
	err     error // the input's error after data (io.EOF at the end)
}

// protocol20250618 is the first revision without JSON-RPC batches.
const protocol20250618 = "2025-06-18"

func newStdioConn(in io.Reader, out io.Writer, limit int, log *slog.Logger, inputEnded func()) *stdioConn {
	c := &stdioConn{
		log: log, limit: limit, in: in, out: &lockedWriter{w: out}, inputEnded: inputEnded,
		lines:    make(chan stdioLine),
		inflight: map[jsonrpc.ID]*stdioCall{},
		closed:   make(chan struct{}),
	}
	// A goroutine reads the input, so that Close unblocks Read even when the input's
	// Read cannot be interrupted (a terminal); the goroutine then ends at its next line.
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			data, tooLong, err := readLine(br, limit)
			select {
			case c.lines <- stdioLine{data: data, tooLong: tooLong, err: err}:
			case <-c.closed:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// stdioTransport hands one stdioConn to Server.Connect.
type stdioTransport struct{ conn *stdioConn }

func (t stdioTransport) Connect(context.Context) (mcp.Connection, error) { return t.conn, nil }

// readLine reads one line (a copy, newline included), or discards it and reports
// tooLong when it is longer than limit.
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit+2 { // the newline (and a CR) are not the message
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, tooLong, err
	}
}

func (c *stdioConn) SessionID() string { return "" }

// Read returns the next message for the SDK, answering every line it does not hand on.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if len(c.queue) > 0 {
			m := c.queue[0]
			c.queue = c.queue[1:]
			return m, nil
		}
		if c.readErr != nil {
			// The input ended (the client closed it to end the session): the calls in
			// flight are cancelled and everything read is answered before the
			// connection closes (serve), rather than dropped by the SDK's teardown at
			// a read error. Read returns once the connection is closed.
			c.inputEnded()
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-c.closed:
				return nil, c.readErr
			}
		}
		var l stdioLine
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case l = <-c.lines:
		}
		c.readErr = l.err
		if m := c.frame(l); m != nil {
			return m, nil
		}
	}
}

// frame checks one line: it returns the message to hand to the SDK, or nil when the
// line was answered here, skipped, or queued (a batch).
func (c *stdioConn) frame(l stdioLine) jsonrpc.Message {
	line := bytes.TrimSpace(l.data)
	switch {
	case l.tooLong:
		c.reply(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message exceeds %d bytes", c.limit))
	case len(line) == 0:
	case !json.Valid(line):
		c.reply(jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: the line is not one JSON value")
	case line[0] == '[':
		c.batch(line)
	default:
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			c.reply(probeID(line), jsonrpc.CodeInvalidRequest, "invalid request: not a JSON-RPC 2.0 message")
			return nil
		}
		if id, ok := c.accept(msg, nil); !ok {
			c.reply(id, jsonrpc.CodeInvalidRequest, duplicateMessage(id))
			return nil
		}
		return msg
	}
	return nil
}

// accept records a message handed to the SDK: a request in flight, a cancellation.
// It refuses (false) a request whose id is in flight.
func (c *stdioConn) accept(msg jsonrpc.Message, b *stdioBatch) (jsonrpc.ID, bool) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return jsonrpc.ID{}, true // a response to a request of the server's
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !req.IsCall() {
		if req.Method == "notifications/cancelled" {
			c.cancelLocked(req.Params)
		}
		return jsonrpc.ID{}, true
	}
	if _, dup := c.inflight[req.ID]; dup {
		return req.ID, false
	}
	c.inflight[req.ID] = &stdioCall{method: req.Method, batch: b}
	if b != nil {
		b.pending++
	}
	if req.Method == "initialize" && c.initDone == nil && !c.initialized {
		c.initID, c.initDone = req.ID, make(chan struct{})
	}
	return jsonrpc.ID{}, true
}

func duplicateMessage(id jsonrpc.ID) string {
	return fmt.Sprintf("invalid request: request id %v is already in flight; use a new id for each request", id.Raw())
}

// cancelLocked marks the request a notifications/cancelled names, when it is in
// flight, so that its response is not sent. initialize is never cancelled (MCP).
func (c *stdioConn) cancelLocked(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	if call, ok := c.inflight[id]; ok && call.method != "initialize" {
		call.cancelled = true
	}
}

// batch serves a batch line (see stdioConn).
func (c *stdioConn) batch(line []byte) {
	var elems []json.RawMessage
	if json.Unmarshal(line, &elems) != nil || len(elems) == 0 {
		c.reply(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: an empty or malformed batch")
		return
	}
	if version := c.negotiated(); version == "" || version >= protocol20250618 {
		why := "invalid request: JSON-RPC batches are not part of MCP from " + protocol20250618 + " on (this connection negotiated " + version + "); send each message on its own line"
		if version == "" {
			why = "invalid request: JSON-RPC batches need a revision that has them (2025-03-26 or earlier) negotiated by initialize first; send each message on its own line"
		}
		answered := false
		for _, e := range elems {
			if m, err := jsonrpc.DecodeMessage(e); err == nil {
				if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
					c.reply(req.ID, jsonrpc.CodeInvalidRequest, why)
					answered = true
				}
			}
		}
		if !answered {
			c.reply(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, why)
		}
		return
	}
	b := &stdioBatch{}
	var refused []json.RawMessage
	for _, e := range elems {
		msg, err := jsonrpc.DecodeMessage(e)
		if err != nil {
			refused = append(refused, errorLine(probeID(e), jsonrpc.CodeInvalidRequest, "invalid request: not a JSON-RPC 2.0 message"))
			continue
		}
		if id, ok := c.accept(msg, b); !ok {
			refused = append(refused, errorLine(id, jsonrpc.CodeInvalidRequest, duplicateMessage(id)))
			continue
		}
		c.queue = append(c.queue, msg)
	}
	// The batch's requests are answered only after Read hands them on, which is after
	// this: the refusals are in the array before any response.
	c.mu.Lock()
	b.replies = append(b.replies, refused...)
	flush := b.pending == 0
	c.mu.Unlock()
	if flush && len(b.replies) > 0 {
		c.writeBatch(b.replies)
	}
}

// negotiated is the revision initialize negotiated ("" when none yet). A batch read
// while initialize is still being answered waits for the answer: a client that
// pipelines them gets the same decision as one that waits.
func (c *stdioConn) negotiated() string {
	c.mu.Lock()
	done := c.initDone
	c.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-c.closed:
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Write sends a message of the SDK's; see stdioConn for the responses it changes or
// withholds.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return c.writeMessage(msg)
	}
	c.mu.Lock()
	call := c.inflight[resp.ID]
	delete(c.inflight, resp.ID)
	if call != nil && call.method == "initialize" && c.initDone != nil && resp.ID == c.initID {
		if resp.Error == nil {
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			_ = json.Unmarshal(resp.Result, &r)
			c.initialized, c.version = true, r.ProtocolVersion
		}
		close(c.initDone)
		c.initDone = nil
	}
	initialized := c.initialized
	if len(c.inflight) == 0 {
		for _, ch := range c.idle {
			close(ch)
		}
		c.idle = nil
	}
	c.mu.Unlock()
	if call == nil {
		return c.writeMessage(resp)
	}
	if call.cancelled {
		c.log.Debug("mcp/server: the client cancelled the request: its response is not sent", "id", resp.ID.Raw(), "method", call.method)
		if call.batch != nil {
			return c.batchReply(call.batch, nil)
		}
		return nil
	}
	if resp.Error != nil && wireCode(resp.Error) == 0 {
		resp = &jsonrpc.Response{ID: resp.ID, Error: coded(call.method, resp.Error, initialized)}
	}
	if call.batch != nil {
		data, err := jsonrpc.EncodeMessage(resp)
		if err != nil {
			return fmt.Errorf("marshaling message: %w", err)
		}
		return c.batchReply(call.batch, data)
	}
	return c.writeMessage(resp)
}

// batchReply records one response of a batch (nil: a cancelled request's), writing
// the array when it was the last one.
func (c *stdioConn) batchReply(b *stdioBatch, data json.RawMessage) error {
	c.mu.Lock()
	if data != nil {
		b.replies = append(b.replies, data)
	}
	b.pending--
	flush := b.pending == 0 && len(b.replies) > 0
	c.mu.Unlock()
	if flush {
		return c.writeBatch(b.replies)
	}
	return nil
}

func (c *stdioConn) writeBatch(replies []json.RawMessage) error {
	data, err := json.Marshal(replies)
	if err != nil {
		return fmt.Errorf("marshaling batch: %w", err)
	}
	_, err = c.out.Write(append(data, '\n'))
	return err
}

func (c *stdioConn) writeMessage(msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("marshaling message: %w", err)
	}
	_, err = c.out.Write(append(data, '\n'))
	return err
}

// drained is closed once no request read is unanswered (a withheld response counts as
// answered).
func (c *stdioConn) drained() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if len(c.inflight) == 0 {
		close(ch)
	} else {
		c.idle = append(c.idle, ch)
	}
	return ch
}

func (c *stdioConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		if cl, ok := c.in.(io.Closer); ok {
			err = cl.Close()
		}
		err = errors.Join(err, c.out.Close())
	})
	return err
}

// reply answers a line that is not handed to the SDK. A write failure is the SDK's to
// see at its next write.
func (c *stdioConn) reply(id jsonrpc.ID, code int64, msg string) {
	_, _ = c.out.Write(append(errorLine(id, code, msg), '\n'))
}

// errorLine is a JSON-RPC error response. JSON-RPC 2.0 answers a request whose id
// cannot be read with "id": null; the SDK's encoder omits a zero id (upstream: it
// cannot encode that response), so that one response is marshalled here, with the
// SDK's error type.
func errorLine(id jsonrpc.ID, code int64, msg string) json.RawMessage {
	e := &jsonrpc.Error{Code: code, Message: "toolgen: " + msg}
	if id.IsValid() {
		if data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: e}); err == nil {
			return data
		}
	}
	data, _ := json.Marshal(struct {
		Version string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", nil, e})
	return data
}

// probeID is the id of a line that is not a valid message, when one can be read.
func probeID(line []byte) jsonrpc.ID {
	var probe struct {
		ID any `json:"id"`
	}
	_ = json.Unmarshal(line, &probe)
	id, _ := jsonrpc.MakeID(probe.ID) // an id of another type stays null
	return id
}

// wireCode is the JSON-RPC code err carries (0: none, a plain Go error).
func wireCode(err error) int64 {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return 0
}

// coded gives a code-0 error of the SDK's a JSON-RPC code (see stdioConn).
func coded(method string, err error, initialized bool) *jsonrpc.Error {
	if !initialized && method != "initialize" {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: fmt.Sprintf("toolgen: %q before initialize: send initialize (and notifications/initialized) first (%v)", method, err)}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}

// lockedWriter serializes whole-line writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error {
	if c, ok := l.w.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
