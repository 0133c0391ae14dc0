package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgen/toolgen/runtime"
	"github.com/toolgen/toolgen/runtime/store"
)

// A session minted for a request that names none (revision 2026-07-28 over HTTP,
// doc.go) costs nothing when it is minted: its catalog is pinned in this process's
// memory (runtime.Registry.PinMinted) and its id is
//
//	"s-" + 9 characters of the minting millisecond + 17 random characters
//	     + 16 characters of a MAC
//
// every character from the base32 alphabet, the MAC (HMAC-SHA256, keyed from
// Options.CallIDSecret, which every process on a store shares) covering the caller's
// tenant, the time and random characters, and the fingerprint of the pinned catalog.
// A client that never echoes its session, the go-sdk client's default, so leaves
// nothing in the store per call: no owner, no pins (issue 20).
//
// Such a client makes every call a session of its own, and its record's session and
// breaker index entries (the run is the session) are keyed by the id. The millisecond
// comes first, in digits whose byte order is their value's (mintedTimeDigits), so ids
// minted later sort later and those entries land at the indexes' right edge, on pages
// a recent record wrote, rather than each on a random leaf (issue 20). What the order
// gives away is when the client was handed the id; 85 random bits stay unguessable.
//
// The first request that echoes the id, in any process, proves it before anything
// else: the MAC must hold for the caller's tenant and for the catalog this process
// holds for the session or the tenant's current one. Then the session is written, its
// owner and that catalog's pins in one commit (runtime.Registry.Mint), and it is a
// session like any other from then on. A MAC that holds for neither is refused as
// another tenant's session is, unless the store already has the session for this
// tenant (an echo after another process wrote it, or an id minted before this
// scheme): another tenant, a forged id, and an id whose catalog changed before its
// first echo (its pins could not be known, and are never guessed, MCP-7) all get
// errSessionUnavailable, whose message says to start a new session.

const (
	mintedRandomLen = mintedTimeLen + 17 // the millisecond, then random characters
	mintedTimeLen   = 9                  // 45 bits of Unix milliseconds: until the year 3084
	mintedMACLen    = 16                 // base32 characters: 80 bits
	mintedIDLen     = len(MintedSessionPrefix) + mintedRandomLen + mintedMACLen
)

var mintedEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// mintedTimeDigits are the base32 alphabet's characters in byte order, the digits of
// a minted id's millisecond: "2" < "A" in bytes, where the standard encoding gives "A"
// the lower value.
const mintedTimeDigits = "234567ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// mintedRandom is the part of a minted id its MAC covers besides the tenant and the
// catalog: now's Unix millisecond, then random characters from rand.Text.
func mintedRandom(now time.Time) string {
	var b [mintedRandomLen]byte
	ms := uint64(now.UnixMilli())
	for i := mintedTimeLen - 1; i >= 0; i-- {
		b[i] = mintedTimeDigits[ms%32]
		ms /= 32
	}
	copy(b[mintedTimeLen:], rand.Text())
	return string(b[:])
}

// mintKey is the MAC key of minted ids, derived from the call id secret so the two
// never share a key.
func mintKey(callIDSecret []byte) []byte {
	h := hmac.New(sha256.New, callIDSecret)
	h.Write([]byte("toolgen minted session id v1"))
	return h.Sum(nil)
}

// mintedMAC is the MAC part of a minted id.
func (s *Server) mintedMAC(tenant, random string, fp [sha256.Size]byte) string {
	h := hmac.New(sha256.New, s.mintKey)
	h.Write(binary.AppendUvarint(nil, uint64(len(tenant))))
	h.Write([]byte(tenant))
	h.Write([]byte(random))
	h.Write(fp[:])
	return mintedEncoding.EncodeToString(h.Sum(nil))[:mintedMACLen]
}

// mint mints a session for tenant and pins it in memory; nothing is written.
func (s *Server) mint(tenant string) string {
	for {
		m := s.opts.Registry.MintCatalog(tenant)
		random := mintedRandom(time.Now())
		id := MintedSessionPrefix + random + s.mintedMAC(tenant, random, m.Fingerprint)
		if s.opts.Registry.PinMinted(runtime.SessionKey{Tenant: tenant, ID: id}, m) {
			return id
		}
	}
}

// isMintedForm reports whether id has the shape of an id mint makes.
func isMintedForm(id string) bool {
	if len(id) != mintedIDLen || !strings.HasPrefix(id, MintedSessionPrefix) {
		return false
	}
	for _, c := range id[len(MintedSessionPrefix):] {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// openMinted handles the first request that echoes minted id (isMintedForm) in this
// process: done with a nil error, the session is written and its owner cached; done is
// false when the caller goes on to claim the id as any session.
func (s *Server) openMinted(ctx context.Context, tenant, id string) (done bool, err error) {
	k := runtime.SessionKey{Tenant: tenant, ID: id}
	random, mac := id[len(MintedSessionPrefix):len(MintedSessionPrefix)+mintedRandomLen], id[len(id)-mintedMACLen:]
	for _, fp := range s.opts.Registry.MintFingerprints(k) {
		if !hmac.Equal([]byte(mac), []byte(s.mintedMAC(tenant, random, fp))) {
			continue
		}
		if !s.mintInRegistry {
			return false, nil // claimed and pinned through Options.Sessions
		}
		ok, err := s.opts.Registry.Mint(ctx, k, fp)
		switch {
		case errors.Is(err, store.ErrConflict): // written already, by another process or earlier
			return false, nil
		case errors.Is(err, runtime.ErrCatalogChanged): // the catalog moved since the check
			return true, errSessionUnavailable(id)
		case err != nil:
			s.log.Error("mcp/server: a minted session could not be recorded", "error", err)
			return true, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "toolgen: the session could not be opened"}
		}
		if ok {
			s.owners.Add(id, tenant)
		}
		return ok, nil
	}
	// No MAC holds: the session is this tenant's only if the store has it already.
	_, pinned, err := s.opts.Pipeline.Store().SessionPinsGet(ctx, tenant, id)
	if err != nil {
		s.log.Error("mcp/server: the session's catalog could not be read", "error", err)
		return true, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "toolgen: the session could not be opened"}
	}
	if !pinned {
		return true, errSessionUnavailable(id)
	}
	return false, nil
}
