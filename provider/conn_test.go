package provider_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

// TestHTTPKeepAliveReuse checks that a completed body is drained so the
// next request reuses the connection.
func TestHTTPKeepAliveReuse(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("one"), providertest.Text("two"), providertest.Text("three"))
	tr := httpTransport(t, srv)
	for range 3 {
		if _, err := run(t, tr, simpleRequest()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // let the background drain return the connection
	}
	reqs := srv.Requests()
	if reqs[0].RemoteAddr == "" || reqs[0].RemoteAddr != reqs[1].RemoteAddr || reqs[1].RemoteAddr != reqs[2].RemoteAddr {
		t.Fatalf("connections not reused: %s %s %s", reqs[0].RemoteAddr, reqs[1].RemoteAddr, reqs[2].RemoteAddr)
	}
}

// TestRedirectNotFollowed checks that a redirect is reported, not followed.
func TestRedirectNotFollowed(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.StatusBody(307, "").WithHeader("Location", srv.URL()+"/responses"), providertest.Text("must not be reached"))
	_, err := run(t, httpTransport(t, srv), simpleRequest())
	if e := asError(t, err); e.Class != provider.HTTPStatus || e.Status != 307 || !e.Dispatched {
		t.Fatalf("got %v", e)
	}
	if len(srv.Requests()) != 1 {
		t.Fatalf("%d requests: the redirect was followed", len(srv.Requests()))
	}
}

// TestDNSFailureNotDispatched checks the resolver failure classification.
func TestDNSFailureNotDispatched(t *testing.T) {
	dnsFail := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: "api.example.invalid", IsNotFound: true}}
	}
	h := provider.NewHTTP(provider.HTTPConfig{BaseURL: "https://api.example.invalid/v1", APIKey: testKey, Client: &http.Client{Transport: &http.Transport{DialContext: dnsFail}}})
	ws := provider.NewWebSocket(provider.WSConfig{BaseURL: "https://api.example.invalid/v1", APIKey: testKey, NetDialContext: dnsFail})
	for _, tr := range []provider.Transport{h, ws} {
		_, err := run(t, tr, simpleRequest())
		if e := asError(t, err); e.Class != provider.Connect || e.Dispatched || e.Phase != provider.Opening {
			t.Fatalf("%T: got %v", tr, e)
		}
	}
}

// TestWebSocketPings checks keepalive pings reach the server while a
// response is slow.
func TestWebSocketPings(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("slow reply").Pace(30 * time.Millisecond))
	ws := provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), APIKey: testKey, PingInterval: 10 * time.Millisecond})
	defer ws.Close()
	if _, err := run(t, ws, simpleRequest()); err != nil {
		t.Fatal(err)
	}
	// The scripted server handles control frames when it next reads, i.e.
	// after the turn; closing the socket makes it read them.
	ws.Close()
	deadline := time.Now().Add(2 * time.Second)
	for srv.Pings() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if srv.Pings() == 0 {
		t.Fatal("no pings seen by the server")
	}
}

// TestNoGoroutineLeaks runs complete, failed and abandoned streams on both
// transports and checks nothing of the provider is left running.
func TestNoGoroutineLeaks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
	srv := providertest.New(nil)
	defer srv.Close()
	srv.Enqueue(providertest.Text("a"), providertest.Text("b c").DropAfter(2), providertest.Stall(),
		providertest.Text("d"), providertest.Text("e f").MalformedAt(2), providertest.Stall())
	h := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey})
	ws := provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), APIKey: testKey})
	for _, tr := range []provider.Transport{h, ws} {
		run(t, tr, simpleRequest())
		run(t, tr, simpleRequest())
		st, err := tr.Open(context.Background(), simpleRequest())
		if err != nil {
			t.Fatal(err)
		}
		st.Next(context.Background())
		st.Close()
	}
	ws.Close()
}

// TestCloseFromAnotherGoroutine checks that Close unblocks a pending Next,
// which then reports Canceled, on every transport.
func TestCloseFromAnotherGoroutine(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			srv := providertest.New(t)
			srv.Enqueue(providertest.Stall())
			st, err := tr.make(t, srv).Open(context.Background(), simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Next(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.AfterFunc(30*time.Millisecond, func() { st.Close() })
			_, err = st.Next(context.Background())
			if e := asError(t, err); e.Class != provider.Canceled {
				t.Fatalf("got %v", e)
			}
		})
	}
}

// TestStalledErrorBody checks that a server sending an error status and
// then stalling its body cannot hang Open: the open bound still applies.
func TestStalledErrorBody(t *testing.T) {
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte(`{"error":{"message":"upstream`))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hs.Close()
	defer close(release)
	tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: hs.URL + "/v1", OpenTimeout: 200 * time.Millisecond})
	// Without the bound, run's 20 s context would end Open as Canceled.
	_, err := run(t, tr, simpleRequest())
	if e := asError(t, err); e.Class != provider.HTTPStatus || e.Status != 502 || !e.Dispatched {
		t.Fatalf("got %v", e)
	}
}

// TestDebugLogsCarryNoCredential runs requests with debug logging on and
// checks that neither the key nor a URL password reaches the log.
func TestDebugLogsCarryNoCredential(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("a"), providertest.Text("b"))
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	base := strings.Replace(srv.URL(), "http://", "http://user:hunter2@", 1)
	h := provider.NewHTTP(provider.HTTPConfig{BaseURL: base, APIKey: testKey, Logger: log})
	ws := provider.NewWebSocket(provider.WSConfig{BaseURL: base, APIKey: testKey, Logger: log})
	defer ws.Close()
	for _, tr := range []provider.Transport{h, ws} {
		if _, err := run(t, tr, simpleRequest()); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	if !strings.Contains(out, "provider http open") || !strings.Contains(out, "provider websocket send") {
		t.Fatalf("no debug records: %s", out)
	}
	if strings.Contains(out, testKey) || strings.Contains(out, "hunter2") || strings.Contains(h.URL()+ws.URL(), "hunter2") {
		t.Fatalf("credential in log or URL: %s", out)
	}
}

// TestRealUnroutableAddress dials the IPv6 documentation prefix, which is
// never routed. Where the OS reports no route (most containers and CI
// hosts) the failure must be NetworkUnavailable and not dispatched; where
// the packet is silently dropped the test is skipped.
func TestRealUnroutableAddress(t *testing.T) {
	tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: "http://[2001:db8::1]:443/v1", APIKey: testKey, OpenTimeout: 3 * time.Second})
	_, err := run(t, tr, simpleRequest())
	e := asError(t, err)
	if e.Class != provider.NetworkUnavailable {
		if e.Class == provider.Connect && !e.Dispatched {
			t.Skipf("this host does not report no-route for 2001:db8::/32 (%v)", e)
		}
		t.Fatalf("got %v", e)
	}
	if e.Dispatched || e.Phase != provider.PreSend {
		t.Fatalf("got %v", e)
	}
}

// TestPrintedConfigsCarryNoCredential checks that printing or logging a
// transport or its configuration (a stray debug print) never shows the key.
func TestPrintedConfigsCarryNoCredential(t *testing.T) {
	hc := provider.HTTPConfig{BaseURL: "https://user:hunter2@api.example.com/v1", APIKey: testKey}
	wc := provider.WSConfig{BaseURL: hc.BaseURL, APIKey: testKey}
	h, ws := provider.NewHTTP(hc), provider.NewWebSocket(wc)
	defer ws.Close()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	for _, v := range []any{hc, &hc, wc, &wc, h, ws} {
		out := fmt.Sprintf("%v %+v %#v %s", v, v, v, v)
		log.Info("dump", "v", v)
		if strings.Contains(out, testKey) || strings.Contains(out, "hunter2") {
			t.Errorf("%T printed the credential: %s", v, out)
		}
		if !strings.Contains(out, "api.example.com") {
			t.Errorf("%T printed nothing useful: %s", v, out)
		}
	}
	if strings.Contains(buf.String(), testKey) || strings.Contains(buf.String(), "hunter2") {
		t.Errorf("slog printed the credential: %s", buf.String())
	}
}
