package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/octet-agent/octet/internal/testbin"
	"github.com/octet-agent/octet/provider/providertest"
	"github.com/octet-agent/octet/session"
)

// writeWorkSession writes a session in dir for workspace ws shaped like
// real work, about size bytes: prompts, assistant entries with reasoning
// (summary and encrypted content), function calls with arguments, and
// tool results of a few kilobytes. It returns its id.
func writeWorkSession(tb testing.TB, dir, ws string, size int, seed int) string {
	tb.Helper()
	s, err := session.Create(dir, session.Header{Cwd: ws, Title: fmt.Sprintf("work %d", seed)})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	enc := strings.Repeat("gAAAAABn"+strconv.Itoa(seed), 200)[:1600]
	out := strings.Repeat(fmt.Sprintf("line %d of a tool's output, as long as lines get in a build log\n", seed), 40)
	parent, written := "", 0
	var recs []session.Record
	for i := 0; written < size; i++ {
		call := fmt.Sprintf("call_%d_%d", seed, i)
		user := session.Entry{ID: session.NewID(), Parent: parent, Type: session.EntryUser, Text: fmt.Sprintf("step %d: look at the failing test and fix what it says", i)}
		asst := session.Entry{ID: session.NewID(), Parent: user.ID, Type: session.EntryAssistant, StopReason: "tool_calls", Items: []session.Item{
			{Type: session.ItemReasoning, Text: "The test fails on the edge case; read the file first, then change the guard.", EncryptedContent: enc},
			{Type: session.ItemText, Text: "Reading the file."},
			{Type: session.ItemFunctionCall, CallID: call, Name: "bash", Arguments: `{"command":"go test ./... -run TestEdge -count=1"}`},
		}}
		res := session.Entry{ID: session.NewID(), Parent: asst.ID, Type: session.EntryToolResult, Result: &session.ToolResult{CallID: call, Tool: "bash", Text: out}}
		recs = append(recs, session.EntryRecord(user), session.EntryRecord(asst), session.EntryRecord(res))
		parent = res.ID
		written += len(user.Text) + len(enc) + len(out) + 400
	}
	if err := s.Append(recs...); err != nil {
		tb.Fatal(err)
	}
	return s.Header().ID
}

// BenchmarkResumedSessionsRSS runs the real `octet lsp` with 32 sessions
// of about 2 MB on disk: after initialize (idle), after resuming each
// (octet/session/resume), and after one prompt in each (the loopback
// provider answers with text; it keeps nothing). It reports the RSS at
// each stage, the growth per session against the session files' size,
// and the live heap of the process's last collection (GODEBUG=gctrace=1)
// against the sessions' contexts (what a request sends). Targets: 32
// resumed sessions under 110 MB RSS, ≤ 2× its file per session.
//
//	go test ./server -run '^$' -bench ResumedSessionsRSS -benchtime 1x -count 5
func BenchmarkResumedSessionsRSS(b *testing.B) {
	const sessions, size = 32, 2 << 20
	bin := testbin.Octet(b)
	home, ws := b.TempDir(), b.TempDir()
	ids := make([]string, sessions)
	var files int64
	for i := range ids {
		ids[i] = writeWorkSession(b, filepath.Join(home, "sessions"), ws, size, i)
		st, err := os.Stat(filepath.Join(home, "sessions", ids[i]+".jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		files += st.Size()
	}
	answer := providertest.Text("done").SSE()
	var contextBytes sync.Map // request body size by session (what one request sends)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		contextBytes.Store(r.Header.Get("Session_id")+strconv.FormatInt(n, 10), n)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(answer)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go hs.Serve(ln)
	defer hs.Close()
	for b.Loop() {
		idle, resumed, prompted, heap := resumedRSS(b, bin, home, ws, "http://"+ln.Addr().String()+"/v1", ids)
		var ctx int64
		contextBytes.Range(func(_, v any) bool { ctx = max(ctx, v.(int64)); return true })
		per := float64(files) / sessions / 1024
		b.ReportMetric(float64(idle)/1024, "idle-MB")
		b.ReportMetric(float64(resumed)/1024, "resumed-MB")
		b.ReportMetric(float64(prompted)/1024, "prompted-MB")
		b.ReportMetric(float64(prompted-idle)/sessions/per, "growth/file")
		b.ReportMetric(float64(resumed-idle)/sessions/per, "resume-growth/file")
		b.ReportMetric(per/1024, "file-MB")
		if heap > 0 && ctx > 0 {
			b.ReportMetric(float64(heap), "live-heap-MB")
			b.ReportMetric(float64(heap)*(1<<20)/float64(sessions*ctx), "heap/context")
		}
	}
}

// gcLive matches the live heap of a gctrace line: "… 12->13->6 MB …".
var gcLive = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)

// resumedRSS starts octet lsp, resumes and prompts each session and
// returns its RSS (KB) idle, after the resumes and after the prompts,
// and the live heap (MB) its last collection found.
func resumedRSS(b *testing.B, bin, home, ws, baseURL string, ids []string) (idle, resumed, prompted, heap int) {
	cmd := exec.Command(bin, "lsp")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+baseURL, "OPENAI_API_KEY=sk-bench-not-a-key", "GODEBUG=gctrace=1")
	stderr, _ := cmd.StderrPipe()
	var mu sync.Mutex
	last := 0
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := gcLive.FindStringSubmatch(sc.Text()); m != nil {
				n, _ := strconv.Atoi(m[3])
				mu.Lock()
				last = n
				mu.Unlock()
			}
		}
	}()
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	conn := jsonrpc2.NewConn(jsonrpc2.NewHeaderStream(rwc{out, in}))
	conn.Go(context.Background(), func(ctx context.Context, req *jsonrpc2.Request) (any, error) { return nil, nil })
	ctx := context.Background()
	if _, err := conn.Call(ctx, "initialize", map[string]any{"rootUri": "file://" + ws, "capabilities": map[string]any{}}, nil); err != nil {
		b.Fatal(err)
	}
	settle := func() int { time.Sleep(time.Second); return vmRSS(cmd.Process.Pid) }
	idle = settle()
	for _, id := range ids {
		if _, err := conn.Call(ctx, "octet/session/resume", map[string]any{"sessionId": id}, nil); err != nil {
			b.Fatalf("resume %s: %v", id, err)
		}
	}
	resumed = settle()
	for _, id := range ids {
		var res promptAnswer
		if _, err := conn.Call(ctx, "octet/prompt", map[string]any{"sessionId": id, "text": "go on"}, &res); err != nil || res.Outcome != "completed" {
			b.Fatalf("prompt %s: %v %+v", id, err, res)
		}
	}
	prompted = settle()
	mu.Lock()
	heap = last
	mu.Unlock()
	return idle, resumed, prompted, heap
}
