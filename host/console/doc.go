// Package console is the reviewer's console (issue 18, UI-1): the web page at /console
// where people decide what toolgen leaves to a person — held calls approved or denied,
// UNCERTAIN calls resolved as happened or not — and read the mode-attributed audit
// timeline, live from the store-backed event stream; and the notifier that tells an
// operator's webhooks of held and UNCERTAIN calls (notifications.yaml).
//
// The pages are rendered on the server with html/template, whose contextual escaping is
// the point: every argument, result excerpt, remote error and id on a page is untrusted
// text, and is only ever text. The style sheet and the one script are embedded; there
// is no build step. The script is an enhancement — live updates over Server-Sent Events
// without a reload, times in the viewer's zone — and every decision works without it
// (plain forms, a redirect after each post). A Content-Security-Policy allows only the
// console's own script and styles.
//
// Every action goes through the operator service (HOST-2, [Operator]): the console
// holds no rule of its own about who may see or decide what; it adds sign-in, sessions
// and CSRF protection in front of it:
//
//   - with OIDC issuers in principals.yaml (issuers[].console), the authorization-code
//     flow with PKCE (S256) against the issuer, as a public or confidential client; with
//     static tokens, a form that exchanges the token for the same session; without
//     principals.yaml, every (loopback) visitor is the host's operator principal;
//   - a session is a random id in a cookie (HttpOnly, SameSite=Strict, Secure unless the
//     server is reached over loopback) naming a session held in this process's memory:
//     bounded in number, expiring when idle and at a fixed lifetime, bound to the Host
//     it was made on, ended by sign-out;
//   - every form carries the session's CSRF token, and a post whose Sec-Fetch-Site says
//     cross-site, or whose Origin is not the page's own, is refused.
//
// The notifier follows the store's event stream in every serving process; each message
// is claimed once on the store before it is sent, so processes sharing a store send it
// once between them. Messages carry classification and a console link, never arguments,
// results or remote text (EV-1), and are signed with HMAC-SHA256.
//
// console imports runtime (principals), runtime/store (the Store interface and its row
// types), model (notifications.yaml, which spec produces), internal/events (the stream
// it relays), internal/textsafe and the standard library's and golang.org/x/oauth2's
// HTTP clients. It must never import spec, a store driver, anything under mcp/, or host
// (which mounts it).
package console
