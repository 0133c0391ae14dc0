package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The SDK's stdio transport (mcp.IOTransport) ends the connection at the first frame
// it cannot decode: invalid JSON, JSON that is not a JSON-RPC message, a frame over
// its size limit. For a stdio server that is the end of the process's only session,
// decided by one bad line. stdioGuard sits between the client's byte stream and the
// transport: MCP stdio messages are newline-delimited and contain no newline, so it
// reads line by line, hands the transport only lines that decode as JSON-RPC (a
// message, or a non-empty batch of them), and answers every other line itself with a
// JSON-RPC error (-32700 for invalid JSON, -32600 otherwise; the id when one can be
// read, else null). Blank lines are skipped.
type stdioGuard struct {
	in      *bufio.Reader
	limit   int
	out     *lockedWriter
	pending []byte // a checked line (with its newline) not yet read by the transport
	err     error  // the input's error, returned once pending is empty
}

func newStdioGuard(in io.Reader, out *lockedWriter, limit int) *stdioGuard {
	return &stdioGuard{in: bufio.NewReaderSize(in, 64<<10), limit: limit, out: out}
}

func (g *stdioGuard) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		line, tooLong, err := g.readLine()
		g.err = err
		line = bytes.TrimSpace(line)
		switch {
		case tooLong:
			g.reject(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message exceeds %d bytes", g.limit))
		case len(line) == 0:
		default:
			if id, code, msg := checkFrame(line); code != 0 {
				g.reject(id, code, msg)
			} else {
				g.pending = append(line, '\n')
			}
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

// readLine reads one line (a copy), or discards it and reports tooLong when it is
// longer than the limit.
func (g *stdioGuard) readLine() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := g.in.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > g.limit+2 { // the newline (and a CR) are not the message
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

// checkFrame returns code 0 when line decodes as the SDK will decode it.
func checkFrame(line []byte) (id jsonrpc.ID, code int64, msg string) {
	if !json.Valid(line) {
		return jsonrpc.ID{}, jsonrpc.CodeParseError, "parse error: the line is not one JSON value"
	}
	if line[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(line, &batch) != nil || len(batch) == 0 {
			return jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: an empty or malformed batch"
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "invalid request: a batch holds a message that is not JSON-RPC 2.0"
			}
		}
		return jsonrpc.ID{}, 0, ""
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		var probe struct {
			ID any `json:"id"`
		}
		_ = json.Unmarshal(line, &probe)
		id, _ = jsonrpc.MakeID(probe.ID) // an id of another type stays null
		return id, jsonrpc.CodeInvalidRequest, "invalid request: not a JSON-RPC 2.0 message"
	}
	return jsonrpc.ID{}, 0, ""
}

// reject answers a refused line. A write failure is the transport's to see.
func (g *stdioGuard) reject(id jsonrpc.ID, code int64, msg string) {
	e := &jsonrpc.Error{Code: code, Message: "toolgen: " + msg}
	var data []byte
	var err error
	if id.IsValid() {
		data, err = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: e})
	} else {
		// JSON-RPC 2.0 answers a request whose id cannot be read with "id": null; the
		// SDK's encoder omits a zero id, so this one response is marshalled here.
		data, err = json.Marshal(struct {
			Version string         `json:"jsonrpc"`
			ID      any            `json:"id"`
			Error   *jsonrpc.Error `json:"error"`
		}{"2.0", nil, e})
	}
	if err != nil {
		return
	}
	_, _ = g.out.Write(append(data, '\n'))
}

// lockedWriter serializes whole-line writes: the transport writes each message as one
// Write of a full line, and the guard writes its answers the same way.
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
