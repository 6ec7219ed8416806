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
// the first call; with the model answering at once it is reported beside
// `git status --porcelain` of the tree, timed in the same iteration
// ("added/git", the median of the iterations' ratios). It also reports
// when the first request reached the server, from just before the
// process started ("first"): the process's start-up, which the work it
// begins ahead of its first call must not delay:
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
	srv, url, stamps := stampedServer(b)
	home := b.TempDir()
	run := func(ws string, pace time.Duration) (first, between float64) {
		srv.Enqueue(providertest.Reply(providertest.FunctionCall("c1", "bash", `{"command":"true"}`)).Pace(pace), providertest.Text("done"))
		cmd := exec.Command(octetBin, "exec", "--ephemeral", "--no-context-files", "--offline", "hi")
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "OCTET_HOME="+home, "OPENAI_BASE_URL="+url, "OPENAI_API_KEY="+fakeKey)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("octet exec: %v\n%s", err, out)
		}
		return stamps(start)
	}
	run(big, 0) // the change store's first snapshot of the tree
	s := map[string][]float64{}
	var added []float64
	for b.Loop() {
		for _, pace := range []time.Duration{0, 5 * time.Millisecond} {
			name := "at-once"
			if pace > 0 {
				name = "streamed"
			}
			for _, ws := range []struct{ name, dir string }{{"10k", big}, {"empty", empty}} {
				first, between := run(ws.dir, pace)
				s[ws.name+"-"+name] = append(s[ws.name+"-"+name], between)
				s[ws.name+"-first"] = append(s[ws.name+"-first"], first)
			}
		}
		git := float64(benchtree.GitStatus(b, big).Microseconds()) / 1000
		s["git"] = append(s["git"], git)
		n := len(s["git"]) - 1
		added = append(added, (s["10k-at-once"][n]-s["empty-at-once"][n])/git)
	}
	slices.Sort(added)
	b.ReportMetric(added[len(added)/2], "added/git")
	for name, xs := range s {
		slices.Sort(xs)
		b.ReportMetric(xs[len(xs)/2], name+"-ms")
	}
}

// stampedServer serves a scripted model on loopback and returns it, its
// base URL and a function returning, of the requests it received since
// the last call, the milliseconds from start to the first and between
// the first two.
func stampedServer(b *testing.B) (*providertest.Server, string, func(start time.Time) (first, between float64)) {
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
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	read := func(start time.Time) (first, between float64) {
		mu.Lock()
		defer mu.Unlock()
		st := stamps
		stamps = nil
		if len(st) < 2 {
			b.Fatalf("%d requests, want 2", len(st))
		}
		return ms(st[0].Sub(start)), ms(st[1].Sub(st[0]))
	}
	return srv, "http://" + ln.Addr().String() + "/v1", read
}
