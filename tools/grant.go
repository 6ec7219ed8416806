package tools

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Grant errors. Consume wraps exactly one of them; callers branch with
// errors.Is. None of them carries the token.
var (
	// ErrGrantInvalid: the grant is unknown, already consumed, revoked, or
	// the zero Grant.
	ErrGrantInvalid = errors.New("grant is not valid")
	// ErrGrantExpired: the grant's lifetime ended before it was consumed.
	ErrGrantExpired = errors.New("grant expired")
	// ErrGrantDigestMismatch: the grant is bound to another intent digest.
	// The grant is burnt by the attempt.
	ErrGrantDigestMismatch = errors.New("grant is bound to another intent")
	// ErrGrantStoreFull: too many outstanding grants.
	ErrGrantStoreFull = errors.New("too many outstanding grants")
)

const (
	// DefaultGrantTTL is how long an approval's grant stays consumable.
	DefaultGrantTTL = 2 * time.Minute
	// maxOutstandingGrants bounds the store; expired grants are swept
	// before a mint is refused.
	maxOutstandingGrants = 4096
	redacted             = "[redacted]"
)

// grantToken is the secret half of a grant: 256 random bits. It lives only
// inside a *Grant held by one Admission.
type grantToken [32]byte

// Grant is a short-lived, single-use capability to commit one exact intent.
// Only the holder has the token; the store keeps its SHA-256 verifier.
// Every formatting, JSON and slog path prints "[redacted]".
type Grant struct {
	// tok yields the token. It is a closure, not a pointer, because fmt
	// dereferences pointers it finds in unexported fields (with %s, %d...)
	// while it prints a func only as an address.
	tok func() *grantToken
}

// Every path that could print or encode a Grant is redacted.
var (
	_ fmt.Stringer           = Grant{}
	_ fmt.GoStringer         = Grant{}
	_ fmt.Formatter          = Grant{}
	_ json.Marshaler         = Grant{}
	_ encoding.TextMarshaler = Grant{}
	_ slog.LogValuer         = Grant{}
)

// String implements fmt.Stringer with a redacted value.
func (Grant) String() string { return redacted }

// GoString implements fmt.GoStringer with a redacted value.
func (Grant) GoString() string { return "tools.Grant{" + redacted + "}" }

// Format implements fmt.Formatter so every verb (%v %+v %#v %s %q %x ...)
// prints the redacted form.
func (g Grant) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte(g.GoString()))
		return
	}
	_, _ = f.Write([]byte(redacted))
}

// MarshalJSON encodes the redacted form.
func (Grant) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText encodes the redacted form.
func (Grant) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue implements slog.LogValuer with the redacted form.
func (Grant) LogValue() slog.Value { return slog.StringValue(redacted) }

// IsZero reports whether g holds no token.
func (g Grant) IsZero() bool { return g.tok == nil }

type grantVerifier [sha256.Size]byte

type grantRecord struct {
	digest  string
	expires time.Time
}

// GrantStore mints and consumes grants. It stores only one-way verifiers,
// never tokens. It is safe for concurrent use; a broker and its clones
// share one store.
type GrantStore struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[grantVerifier]grantRecord
}

// NewGrantStore returns a store whose grants live for ttl (DefaultGrantTTL
// when ttl <= 0).
func NewGrantStore(ttl time.Duration) *GrantStore {
	if ttl <= 0 {
		ttl = DefaultGrantTTL
	}
	return &GrantStore{ttl: ttl, m: make(map[grantVerifier]grantRecord)}
}

// TTL returns the lifetime of newly minted grants.
func (s *GrantStore) TTL() time.Duration { return s.ttl }

// Mint creates a grant bound to digest, valid until now+TTL.
func (s *GrantStore) Mint(digest string) (Grant, error) {
	var tok grantToken
	if _, err := rand.Read(tok[:]); err != nil {
		return Grant{}, fmt.Errorf("mint grant: %w", err)
	}
	ver := verifierOf(&tok)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxOutstandingGrants {
		s.sweepLocked(now)
		if len(s.m) >= maxOutstandingGrants {
			return Grant{}, fmt.Errorf("mint grant: %w", ErrGrantStoreFull)
		}
	}
	s.m[ver] = grantRecord{digest: digest, expires: now.Add(s.ttl)}
	return Grant{tok: func() *grantToken { return &tok }}, nil
}

// Consume atomically checks and removes g: it succeeds at most once per
// grant, only for the digest g was minted for, and only before it
// expires. Any attempt removes the grant, so a wrong digest or an expired
// grant cannot be retried.
func (s *GrantStore) Consume(g Grant, digest string) error {
	if g.tok == nil {
		return ErrGrantInvalid
	}
	ver := verifierOf(g.tok())
	now := time.Now()
	s.mu.Lock()
	rec, ok := s.m[ver]
	if ok {
		delete(s.m, ver)
	}
	s.mu.Unlock()
	switch {
	case !ok:
		return ErrGrantInvalid
	case !now.Before(rec.expires):
		return ErrGrantExpired
	case subtle.ConstantTimeCompare([]byte(rec.digest), []byte(digest)) != 1:
		return ErrGrantDigestMismatch
	}
	return nil
}

// Revoke removes g if it is still outstanding. It is idempotent.
func (s *GrantStore) Revoke(g Grant) {
	if g.tok == nil {
		return
	}
	ver := verifierOf(g.tok())
	s.mu.Lock()
	delete(s.m, ver)
	s.mu.Unlock()
}

// Outstanding returns the number of grants not yet consumed, revoked or
// swept (expired grants count until a sweep).
func (s *GrantStore) Outstanding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func (s *GrantStore) sweepLocked(now time.Time) {
	for v, r := range s.m {
		if !now.Before(r.expires) {
			delete(s.m, v)
		}
	}
}

func verifierOf(t *grantToken) grantVerifier {
	return sha256.Sum256(append([]byte("octet.grant.v1\x00"), t[:]...))
}
