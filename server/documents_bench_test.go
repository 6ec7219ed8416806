package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/testbin"
)

// BenchmarkOpenDocuments measures what open documents cost the built
// `octet lsp` process: after initialize (baseline), then with
// documents-N open (each docKB of text, one incremental change each), it
// reports VmRSS and open file descriptors. docs/performance.md records it:
//
//	go test ./server -run '^$' -bench OpenDocuments -benchtime 1x -count 3
func BenchmarkOpenDocuments(b *testing.B) {
	bin := testbin.Octet(b)
	for _, n := range []int{500} {
		for _, kb := range []int{20, 200} {
			b.Run(fmt.Sprintf("docs=%d/size=%dKiB", n, kb), func(b *testing.B) {
				for b.Loop() {
					base, with := openDocumentsCost(b, bin, n, kb)
					b.ReportMetric(float64(base.rssKB), "idle-RSS-KB")
					b.ReportMetric(float64(with.rssKB), "open-RSS-KB")
					b.ReportMetric(float64(base.fds), "idle-fds")
					b.ReportMetric(float64(with.fds), "open-fds")
				}
			})
		}
	}
}

type procCost struct{ rssKB, fds int }

func costOf(pid int) procCost {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return procCost{rssKB: vmRSS(pid), fds: len(ents)}
}

// lspPipe is a minimal LSP client over a process's stdin/stdout.
type lspPipe struct {
	in  io.Writer
	out *bufio.Reader
	id  int
}

func (p *lspPipe) send(msg map[string]any) {
	msg["jsonrpc"] = "2.0"
	body, _ := json.Marshal(msg)
	fmt.Fprintf(p.in, "Content-Length: %d\r\n\r\n%s", len(body), body)
}

// call sends a request and reads messages until its answer.
func (p *lspPipe) call(tb testing.TB, method string, params any) {
	p.id++
	p.send(map[string]any{"id": p.id, "method": method, "params": params})
	for {
		n := 0
		for {
			line, err := p.out.ReadString('\n')
			if err != nil {
				tb.Fatalf("reading the answer to %s: %v", method, err)
			}
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Content-Length: "); ok {
				n, _ = strconv.Atoi(v)
			}
			if strings.TrimSpace(line) == "" {
				break
			}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(p.out, body); err != nil {
			tb.Fatal(err)
		}
		var m struct {
			ID     *int   `json:"id"`
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		if m.ID != nil && *m.ID == p.id && m.Method == "" {
			return
		}
	}
}

func openDocumentsCost(b *testing.B, bin string, n, kb int) (base, with procCost) {
	ws, home := b.TempDir(), b.TempDir()
	c := exec.Command(bin, "lsp")
	c.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_API_KEY=test-not-a-key", "OPENAI_BASE_URL=http://127.0.0.1:9/v1")
	c.Dir = ws
	stdin, _ := c.StdinPipe()
	stdout, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); _ = c.Process.Kill(); _ = c.Wait() }()
	p := &lspPipe{in: stdin, out: bufio.NewReaderSize(stdout, 1<<16)}
	p.call(b, "initialize", map[string]any{"processId": nil, "rootUri": "file://" + ws, "capabilities": map[string]any{
		"workspace": map[string]any{"applyEdit": true, "workspaceEdit": map[string]any{"documentChanges": true}},
	}})
	p.send(map[string]any{"method": "initialized", "params": map[string]any{}})
	time.Sleep(300 * time.Millisecond)
	base = costOf(c.Process.Pid)
	line := strings.Repeat("x", 63) + "\n"
	text := strings.Repeat(line, kb*1024/len(line))
	for i := range n {
		uri := "file://" + filepath.Join(ws, fmt.Sprintf("pkg%d/file%d.go", i%20, i))
		p.send(map[string]any{"method": "textDocument/didOpen", "params": map[string]any{"textDocument": map[string]any{
			"uri": uri, "languageId": "go", "version": 1, "text": text,
		}}})
		at := map[string]any{"line": 3, "character": 5}
		p.send(map[string]any{"method": "textDocument/didChange", "params": map[string]any{
			"textDocument":   map[string]any{"uri": uri, "version": 2},
			"contentChanges": []any{map[string]any{"range": map[string]any{"start": at, "end": at}, "text": "typed"}},
		}})
	}
	p.call(b, "octet/session/list", map[string]any{}) // every notification before it is handled
	time.Sleep(300 * time.Millisecond)
	return base, costOf(c.Process.Pid)
}
