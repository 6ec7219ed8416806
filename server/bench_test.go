package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/agent"
	"github.com/octet-agent/octet/host"
	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/tools"
)

// pingPongSSE serves one scripted turn as SSE, one frame at a time: after
// each output_text delta it waits until the receiver reports the delta
// arrived, so each delta's latency is measured alone. sent receives the
// time each delta frame was flushed.
type pingPongSSE struct {
	body []byte
	sent atomic.Int64 // UnixNano of the last delta frame, set before writing it
	ack  chan struct{}
}

func (p *pingPongSSE) since() time.Duration { return time.Since(time.Unix(0, p.sent.Load())) }

func newPingPong(words int) *pingPongSSE {
	text := strings.TrimSpace(strings.Repeat("w ", words))
	return &pingPongSSE{
		body: providertest.Text(text).SSE(),
		ack:  make(chan struct{}, 1),
	}
}

func (p *pingPongSSE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for _, fr := range bytes.SplitAfter(p.body, []byte("\n\n")) {
		if len(fr) == 0 {
			continue
		}
		delta := bytes.Contains(fr, []byte("response.output_text.delta"))
		if delta {
			p.sent.Store(time.Now().UnixNano())
		}
		_, _ = w.Write(fr)
		fl.Flush()
		if delta {
			select {
			case <-p.ack:
			case <-r.Context().Done():
				return
			}
		}
	}
}

// BenchmarkDeltaToEvent measures the latency octet adds between a provider
// text delta arriving on its loopback socket and the matching octet/event
// reaching the editor (the real provider client, agent and server; a
// fake editor over net.Pipe). The floor, measured in the same run, is the
// same loopback SSE stream read by a bare HTTP client that forwards each
// delta as a JSON-RPC notification over net.Pipe, without octet.
func BenchmarkDeltaToEvent(b *testing.B) { deltaToEvent(b, 0, inProcess) }

// BenchmarkDeltaToEventAfter100k is BenchmarkDeltaToEvent in a session
// that has already emitted 100,000 events (its replay buffer full, its
// sequence numbers long): the prompts that get it there are not measured.
func BenchmarkDeltaToEventAfter100k(b *testing.B) { deltaToEvent(b, 100_000, inProcess) }

// BenchmarkDeltaToEventProcess is BenchmarkDeltaToEvent through the real
// octet lsp binary on the stdin/stdout pipes an editor gives it; its
// floor's forwarder is a process on pipes too.
func BenchmarkDeltaToEventProcess(b *testing.B) { deltaToEvent(b, 0, octetProcess) }

// BenchmarkDeltaToEventProcessAfter100k is BenchmarkDeltaToEventProcess
// after 100,000 events.
func BenchmarkDeltaToEventProcessAfter100k(b *testing.B) { deltaToEvent(b, 100_000, octetProcess) }

// editorLink connects a benchmark's editor to an octet serving the
// provider at baseURL; floor starts the floor's forwarder of the provider
// at url over the same kind of link, returning the editor's end and a
// wait for the forwarder's end.
type editorLink struct {
	connect func(b *testing.B, baseURL string) io.ReadWriteCloser
	floor   func(b *testing.B, url string) (io.ReadWriteCloser, func())
}

// inProcess serves over net.Pipe in the benchmark's process.
var inProcess = editorLink{
	connect: func(b *testing.B, baseURL string) io.ReadWriteCloser {
		cli, srvEnd := net.Pipe()
		go New(Options{Runtime: benchRuntime(b, baseURL)}).Serve(context.Background(), srvEnd)
		return cli
	},
	floor: func(b *testing.B, url string) (io.ReadWriteCloser, func()) {
		a, z := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- forwardDeltas(url, a); a.Close() }()
		return z, func() {
			if err := <-done; err != nil {
				b.Error(err)
			}
		}
	},
}

// octetProcess runs the real binary on pipes, as an editor starts it; its
// floor's forwarder is another process (this test binary) on pipes too.
var octetProcess = editorLink{
	connect: func(b *testing.B, baseURL string) io.ReadWriteCloser {
		cmd := exec.Command(testbin.Octet(b), "lsp")
		cmd.Env = append(os.Environ(), "OCTET_HOME="+b.TempDir(), "OPENAI_BASE_URL="+baseURL, "OPENAI_API_KEY=sk-bench-not-a-key")
		return startPiped(b, cmd)
	},
	floor: func(b *testing.B, url string) (io.ReadWriteCloser, func()) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), floorForwardEnv+"="+url)
		return startPiped(b, cmd), func() {
			if err := cmd.Wait(); err != nil {
				b.Errorf("floor forwarder: %v", err)
			}
		}
	},
}

// startPiped starts cmd with its stdin and stdout on pipes, killed when b
// ends, and returns the other ends.
func startPiped(b *testing.B, cmd *exec.Cmd) io.ReadWriteCloser {
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return rwc{out, in}
}

// floorForwardEnv, set to a provider URL, makes the test binary the floor's
// forwarding process (TestMain).
const floorForwardEnv = "OCTET_BENCH_FLOOR_FORWARD"

// floorTurns is how many turns the floor forwards.
const floorTurns = 5

// forwardDeltas is the floor: floorTurns times, it reads the SSE stream of
// the provider at url and forwards each text delta to conn as an
// octet/event notification, with no octet in between.
func forwardDeltas(url string, conn io.ReadWriteCloser) error {
	send := jsonrpc2.NewConn(jsonrpc2.NewHeaderStream(conn))
	send.Go(context.Background(), jsonrpc2.MethodNotFoundHandler)
	for range floorTurns {
		resp, err := http.Post(url, "application/json", strings.NewReader("{}"))
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Bytes()
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok && bytes.Contains(data, []byte("output_text.delta")) {
				var ev struct{ Delta string }
				_ = json.Unmarshal(data, &ev)
				_ = send.Notify(context.Background(), "octet/event", map[string]any{"event": map[string]any{"kind": "output_delta", "text": ev.Delta}})
			}
		}
		resp.Body.Close()
	}
	return nil
}

// deltaToEvent measures delta → octet/event latency after warm events
// were emitted in the same session.
func deltaToEvent(b *testing.B, warm int, link editorLink) {
	const words = 400
	floor := deltaFloor(b, words, link)
	var lat []time.Duration
	pp := newPingPong(words)
	hs := &http.Server{Handler: pp}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go hs.Serve(ln)
	defer hs.Close()

	cli := link.connect(b, "http://"+ln.Addr().String()+"/v1")
	var mu sync.Mutex
	events := 0
	conn := jsonrpc2.NewConn(jsonrpc2.NewHeaderStream(cli))
	conn.Go(context.Background(), func(ctx context.Context, req *jsonrpc2.Request) (any, error) {
		if req.Method() != "octet/event" {
			return nil, nil
		}
		mu.Lock()
		events++
		mu.Unlock()
		if bytes.Contains(req.Params(), []byte(`"output_delta"`)) {
			d := pp.since()
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
			pp.ack <- struct{}{}
		}
		return nil, nil
	})
	defer cli.Close()
	ctx := context.Background()
	ws := b.TempDir()
	caps := map[string]any{"experimental": map[string]any{"octet": map[string]any{"events": true}}}
	if _, err := conn.Call(ctx, "initialize", map[string]any{"rootUri": "file://" + ws, "capabilities": caps}, nil); err != nil {
		b.Fatal(err)
	}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if _, err := conn.Call(ctx, "octet/session/new", map[string]any{}, &sess); err != nil {
		b.Fatal(err)
	}
	prompt := func() {
		var res promptAnswer
		if _, err := conn.Call(ctx, "octet/prompt", map[string]any{"sessionId": sess.SessionID, "text": "go"}, &res); err != nil || res.Outcome != "completed" {
			b.Fatalf("prompt: %v %+v", err, res)
		}
	}
	for {
		mu.Lock()
		n := events
		mu.Unlock()
		if n >= warm {
			break
		}
		prompt()
	}
	mu.Lock()
	lat = nil
	mu.Unlock()
	for b.Loop() {
		prompt()
	}
	mu.Lock()
	p50, p99 := percentiles(lat)
	mu.Unlock()
	f50, f99 := percentiles(floor)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(f50.Microseconds()), "floor-p50-µs")
	b.ReportMetric(float64(f99.Microseconds()), "floor-p99-µs")
	b.ReportMetric(float64((p99 - f99).Microseconds()), "added-p99-µs")
}

// deltaFloor is the transport floor of BenchmarkDeltaToEvent.
func deltaFloor(b *testing.B, words int, link editorLink) []time.Duration {
	pp := newPingPong(words)
	hs := &http.Server{Handler: pp}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go hs.Serve(ln)
	defer hs.Close()
	z, wait := link.floor(b, "http://"+ln.Addr().String()+"/v1/responses")
	defer z.Close()
	var mu sync.Mutex
	var lat []time.Duration
	recv := jsonrpc2.NewConn(jsonrpc2.NewHeaderStream(z))
	recv.Go(context.Background(), func(ctx context.Context, req *jsonrpc2.Request) (any, error) {
		d := pp.since()
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		pp.ack <- struct{}{}
		return nil, nil
	})
	wait()
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(lat)
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}

// benchRuntime is the real runtime against a provider at baseURL.
func benchRuntime(b *testing.B, baseURL string) *host.Runtime {
	transport := provider.NewHTTP(provider.HTTPConfig{BaseURL: baseURL})
	return &host.Runtime{
		SessionsDir: filepath.Join(b.TempDir(), "sessions"),
		NewAgent: func(ctx context.Context, spec host.AgentSpec) (*host.Built, error) {
			toolHost := tools.NewHost()
			broker := tools.NewBroker(tools.BrokerConfig{Policy: tools.Controlled, Approver: spec.Approver})
			a, err := agent.New(agent.Config{
				Session: spec.Session, Transport: transport, Host: toolHost, Broker: broker,
				Model: provider.Model{Name: "gpt-test", ContextWindow: 128_000, MaxOutputTokens: 16_000},
			})
			if err != nil {
				return nil, err
			}
			return &host.Built{Agent: a, Policy: broker.EffectiveToolPolicy()}, nil
		},
	}
}

// BenchmarkInitializeInProcess is server construction plus one
// initialize round trip over net.Pipe (no process start).
func BenchmarkInitializeInProcess(b *testing.B) {
	rt := &host.Runtime{SessionsDir: b.TempDir()}
	for b.Loop() {
		cli, srvEnd := net.Pipe()
		done := make(chan struct{})
		go func() { New(Options{Runtime: rt}).Serve(context.Background(), srvEnd); close(done) }()
		conn := jsonrpc2.NewConn(jsonrpc2.NewHeaderStream(cli))
		conn.Go(context.Background(), jsonrpc2.MethodNotFoundHandler)
		if _, err := conn.Call(context.Background(), "initialize", map[string]any{"capabilities": map[string]any{}}, nil); err != nil {
			b.Fatal(err)
		}
		cli.Close()
		<-done
	}
}

// BenchmarkProcessStartToInitialize measures `octet lsp` from exec to the
// initialize answer, and its idle RSS after initialize. The baseline in the
// same run is `octet version` (the same binary's process start and exit),
// and gopls when it is installed.
func BenchmarkProcessStartToInitialize(b *testing.B) {
	bin := testbin.Octet(b)
	home := b.TempDir()
	env := append(os.Environ(), "OCTET_HOME="+home, "OPENAI_API_KEY=test-not-a-key", "OPENAI_BASE_URL=http://127.0.0.1:9/v1")
	var base, lsp []time.Duration
	var rss int
	var gopls []time.Duration
	goplsRSS := 0
	goplsBin, _ := exec.LookPath("gopls")
	for b.Loop() {
		t0 := time.Now()
		c := exec.Command(bin, "version")
		c.Env = env
		if err := c.Run(); err != nil {
			b.Fatal(err)
		}
		base = append(base, time.Since(t0))
		d, r := startToInit(b, bin, []string{"lsp"}, env, true)
		lsp = append(lsp, d)
		rss = r
		if goplsBin != "" {
			d, r := startToInit(b, goplsBin, nil, env, true)
			gopls = append(gopls, d)
			goplsRSS = r
		}
	}
	m := func(d []time.Duration) float64 { p, _ := percentiles(d); return float64(p.Microseconds()) / 1000 }
	b.ReportMetric(m(lsp), "lsp-init-ms")
	b.ReportMetric(m(base), "version-ms")
	b.ReportMetric(m(lsp)/m(base), "lsp/version")
	b.ReportMetric(float64(rss), "idle-RSS-KB")
	if len(gopls) > 0 {
		b.ReportMetric(m(gopls), "gopls-init-ms")
		b.ReportMetric(m(lsp)/m(gopls), "lsp/gopls")
		b.ReportMetric(float64(goplsRSS), "gopls-idle-RSS-KB")
	}
}

// startToInit starts bin, sends initialize and returns the time to its
// answer and (when rssToo) the process's VmRSS after a short idle.
func startToInit(b *testing.B, bin string, args, env []string, rssToo bool) (time.Duration, int) {
	ws := b.TempDir()
	t0 := time.Now()
	c := exec.Command(bin, args...)
	c.Env = env
	c.Dir = ws
	stdin, _ := c.StdinPipe()
	stdout, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"processId":null,"rootUri":"file://%s","capabilities":{}}}`, ws)
	fmt.Fprintf(stdin, "Content-Length: %d\r\n\r\n%s", len(body), body)
	r := bufio.NewReader(stdout)
	n := 0
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatalf("%s: %v", bin, err)
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Content-Length: "); ok {
			n, _ = strconv.Atoi(v)
		}
		if strings.TrimSpace(line) == "" {
			break
		}
	}
	if _, err := io.ReadFull(r, make([]byte, n)); err != nil {
		b.Fatal(err)
	}
	d := time.Since(t0)
	rss := 0
	if rssToo {
		time.Sleep(300 * time.Millisecond)
		rss = vmRSS(c.Process.Pid)
	}
	stdin.Close()
	_ = c.Process.Kill()
	_ = c.Wait()
	return d, rss
}

func vmRSS(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}
