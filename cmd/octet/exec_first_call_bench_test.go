package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/octet-agent/octet/internal/benchtree"
	"github.com/octet-agent/octet/provider/providertest"
)

// BenchmarkExecFirstCall runs `octet exec` (the real binary) against a
// loopback scripted model that answers the first request with a bash
// `true` call and the second with text, and times what lies between the
// two requests reaching the server: the model's streaming of its answer,
// then the process's first bash call (its first checkpoint included)
// and the next request. It does so in a committed workspace of 10,000
// files (its change store warm: the process's first snapshot compares
// with the last one's) and in an empty one, with a model that streams its
// answer at once and one that takes ~50 ms (5 ms between events). The
// difference between the workspaces is what the first checkpoint adds to
// the first call:
//
//	go test ./cmd/octet -run '^$' -bench ExecFirstCall -benchtime 8x
func BenchmarkExecFirstCall(b *testing.B) {
	if raceEnabled {
		b.Skip("the race detector's binary is not the one users run")
	}
	// Out of octet's and git's racy windows (2 s), so no file is hashed
	// again for being recently changed.
	big, empty := b.TempDir(), b.TempDir()
	benchtree.Make(b, big, benchtree.Tree{Dirs: 100, Files: 100, Size: 20 << 10}, 2100*time.Millisecond)
	benchtree.Make(b, empty, benchtree.Tree{}, 0)
	srv, url, between := stampedServer(b)
	home := b.TempDir()
	run := func(ws string, pace time.Duration) float64 {
		srv.Enqueue(providertest.Reply(providertest.FunctionCall("c1", "bash", `{"command":"true"}`)).Pace(pace), providertest.Text("done"))
		cmd := exec.Command(octetBin, "exec", "--ephemeral", "--no-context-files", "--offline", "hi")
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+url, "OPENAI_API_KEY="+fakeKey)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("octet exec: %v\n%s", err, out)
		}
		return between()
	}
	run(big, 0) // the change store's first snapshot of the tree
	s := map[string][]float64{}
	for b.Loop() {
		for _, pace := range []time.Duration{0, 5 * time.Millisecond} {
			name := "at-once"
			if pace > 0 {
				name = "streamed"
			}
			s["10k-"+name] = append(s["10k-"+name], run(big, pace))
			s["empty-"+name] = append(s["empty-"+name], run(empty, pace))
		}
	}
	for name, xs := range s {
		slices.Sort(xs)
		b.ReportMetric(xs[len(xs)/2], name+"-ms")
	}
}

// stampedServer serves a scripted model on loopback and returns it, its
// base URL and a function returning the milliseconds between the first
// two requests it received since the last call.
func stampedServer(b *testing.B) (*providertest.Server, string, func() float64) {
	srv := providertest.NewInProcess(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var stamps []time.Time
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		stamps = append(stamps, time.Now())
		mu.Unlock()
		srv.ServeHTTP(w, r)
	})}
	go hs.Serve(ln)
	b.Cleanup(func() { hs.Close() })
	between := func() float64 {
		mu.Lock()
		defer mu.Unlock()
		st := stamps
		stamps = nil
		if len(st) < 2 {
			b.Fatalf("%d requests, want 2", len(st))
		}
		return float64(st[1].Sub(st[0]).Microseconds()) / 1000
	}
	return srv, "http://" + ln.Addr().String() + "/v1", between
}
