package tools

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestGrantSingleUse(t *testing.T) {
	s := NewGrantStore(time.Minute)
	g, err := s.Mint("d1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(g, "d1"); err != nil {
		t.Fatalf("first consume: %v", err)
	}
	if err := s.Consume(g, "d1"); !errors.Is(err, ErrGrantInvalid) {
		t.Fatalf("replay: %v, want ErrGrantInvalid", err)
	}
}

func TestGrantWrongDigestBurnsGrant(t *testing.T) {
	s := NewGrantStore(time.Minute)
	g, _ := s.Mint("d1")
	if err := s.Consume(g, "d2"); !errors.Is(err, ErrGrantDigestMismatch) {
		t.Fatalf("wrong digest: %v", err)
	}
	if err := s.Consume(g, "d1"); !errors.Is(err, ErrGrantInvalid) {
		t.Fatalf("after a wrong-digest attempt the grant must be gone: %v", err)
	}
}

func TestGrantExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewGrantStore(30 * time.Second)
		g, _ := s.Mint("d")
		early, _ := s.Mint("d")
		time.Sleep(29 * time.Second)
		if err := s.Consume(early, "d"); err != nil {
			t.Fatalf("before expiry: %v", err)
		}
		time.Sleep(time.Second)
		if err := s.Consume(g, "d"); !errors.Is(err, ErrGrantExpired) {
			t.Fatalf("at expiry: %v, want ErrGrantExpired", err)
		}
		if s.Outstanding() != 0 {
			t.Fatal("expired grant still stored")
		}
	})
}

func TestGrantRevokeAndZero(t *testing.T) {
	s := NewGrantStore(0)
	if s.TTL() != DefaultGrantTTL {
		t.Fatalf("default ttl %v", s.TTL())
	}
	g, _ := s.Mint("d")
	s.Revoke(g)
	s.Revoke(g)
	if err := s.Consume(g, "d"); !errors.Is(err, ErrGrantInvalid) {
		t.Fatalf("revoked: %v", err)
	}
	if err := s.Consume(Grant{}, "d"); !errors.Is(err, ErrGrantInvalid) || !(Grant{}).IsZero() {
		t.Fatalf("zero grant: %v", err)
	}
}

func TestGrantConcurrentConsumersExactlyOne(t *testing.T) {
	for round := 0; round < 20; round++ {
		s := NewGrantStore(time.Minute)
		g, _ := s.Mint("digest")
		var ok, invalid atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 100; i++ {
			wg.Go(func() {
				<-start
				switch err := s.Consume(g, "digest"); {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ErrGrantInvalid):
					invalid.Add(1)
				default:
					t.Errorf("unexpected %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if ok.Load() != 1 || invalid.Load() != 99 {
			t.Fatalf("round %d: %d successes, %d invalid; want 1 and 99", round, ok.Load(), invalid.Load())
		}
	}
}

// TestGrantConcurrentAdmissionsOneCommit drives the same grant through 100
// admissions of one approved intent: exactly one commits and runs the tool.
func TestGrantConcurrentAdmissionsOneCommit(t *testing.T) {
	pt := newProbe("edit", WorkspaceMutation)
	b := NewBroker(BrokerConfig{Approver: approveAll()})
	host := mustHost(t, pt)
	adm, _ := b.Admit(context.Background(), host, DispatchRequest{RunID: "r", CallID: "c", Tool: "edit"}, DispatchObserver{})
	if adm == nil || adm.grant == nil {
		t.Fatal("not admitted with a grant")
	}
	g := *adm.grant
	// 100 admissions sharing the one grant (as a replaying attacker would).
	clones := make([]*Admission, 100)
	for i := range clones {
		clones[i] = &Admission{b: b, host: host, tool: pt, intent: adm.intent, digest: adm.digest, reason: ReasonApproved, grant: &g}
	}
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for _, c := range clones {
		wg.Go(func() {
			if _, d := c.Execute(context.Background()); d.Decision == DecisionAllowed {
				allowed.Add(1)
			} else if d.Reason != ReasonCommitDenied {
				t.Errorf("reason %s", d.Reason)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 1 || pt.executed.Load() != 1 {
		t.Fatalf("allowed %d, executed %d; want 1, 1", allowed.Load(), pt.executed.Load())
	}
}

// leaksToken reports whether out contains the token in any common
// encoding.
func leaksToken(tok *grantToken, out string) bool {
	h := hex.EncodeToString(tok[:])
	return strings.Contains(strings.ToLower(out), h) ||
		strings.Contains(out, fmt.Sprint(tok[:])) ||
		strings.Contains(out, fmt.Sprint(*tok)) ||
		bytes.Contains([]byte(out), tok[:8])
}

func TestGrantRedactedEverywhere(t *testing.T) {
	s := NewGrantStore(time.Minute)
	g, _ := s.Mint("d")
	pt := newProbe("edit", WorkspaceMutation)
	b := NewBroker(BrokerConfig{Approver: approveAll()})
	adm, _ := b.Admit(context.Background(), mustHost(t, pt), DispatchRequest{CallID: "c", Tool: "edit"}, DispatchObserver{})
	type holder struct {
		G   Grant
		P   *Grant
		g   Grant
		Adm *Admission
	}
	h := holder{G: g, P: &g, g: g, Adm: adm}
	var outs []string
	for _, v := range []any{g, &g, h, &h, adm, *adm.grant} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
			outs = append(outs, fmt.Sprintf(verb, v))
		}
		if j, err := json.Marshal(v); err == nil {
			outs = append(outs, string(j))
		}
	}
	var logBuf bytes.Buffer
	for _, hnd := range []slog.Handler{slog.NewJSONHandler(&logBuf, nil), slog.NewTextHandler(&logBuf, nil)} {
		l := slog.New(hnd)
		l.Info("grant", "g", g, "p", &g, "adm", adm, "holder", h)
		l.Info("grant", slog.Any("g", g))
	}
	outs = append(outs, logBuf.String())
	for _, tok := range []*grantToken{g.tok(), adm.grant.tok()} {
		for _, o := range outs {
			if leaksToken(tok, o) {
				t.Fatalf("token leaked in %q", o)
			}
		}
	}
	if !strings.Contains(fmt.Sprint(g), "redacted") {
		t.Fatalf("String = %q", fmt.Sprint(g))
	}
}
