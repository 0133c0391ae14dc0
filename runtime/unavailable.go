package runtime

import "errors"

// UnavailableError is what an adapter's tool (one in a reserved domain: mcp, device)
// returns when the call could not run, or was cut off, for a reason outside the call
// that has its own reason code: the device that serves the tool is offline
// (ReasonDeviceOffline), or it disconnected during the call (ReasonDeviceDisconnected);
// the upstream MCP server is not connected (ReasonUpstreamOffline), or its connection
// was lost during the call (ReasonUpstreamDisconnected).
//
// The pipeline reports Reason only where no effect is in doubt: a call whose watermark
// is set and whose class is not safe to repeat ends effect_may_have_happened, whatever
// the error says (RT-4, DEV-3). Any other reason, or a tool outside the reserved
// domains, is treated as a plain error (tool_error): the reason table's promises are
// the platform's, so a builtin cannot borrow them.
type UnavailableError struct {
	Reason ReasonCode
	Err    error
}

func (e *UnavailableError) Error() string {
	if e.Err == nil {
		return string(e.Reason)
	}
	return string(e.Reason) + ": " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// adapterUnavailableReasons are the reasons an adapter may claim with UnavailableError.
var adapterUnavailableReasons = map[ReasonCode]bool{
	ReasonDeviceOffline:        true,
	ReasonDeviceDisconnected:   true,
	ReasonUpstreamOffline:      true,
	ReasonUpstreamDisconnected: true,
}

// adapterUnavailable returns the reason err claims, if an adapter may claim it.
func adapterUnavailable(err error) (ReasonCode, bool) {
	var ue *UnavailableError
	if errors.As(err, &ue) && adapterUnavailableReasons[ue.Reason] {
		return ue.Reason, true
	}
	return "", false
}
