//go:build unix

package tools

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/octet-agent/octet/changes"
	"github.com/octet-agent/octet/internal/benchtree"
	"github.com/octet-agent/octet/internal/proc"
)

// The checkpoint benchmarks time whole bash calls (the tool's Execute of
// a command the broker did not admit as a read: snapshot, command,
// snapshot) beside their baselines in the same iteration, so load hits
// them alike: the same call in an empty workspace, `bash -c true`
// started directly, and `git status --porcelain` of the same tree. Trees
// are generated once and cached under os.TempDir() (octet-bench-trees).
//
//	go test ./tools -run '^$' -bench 'BashCheckpoint|BashFirstCall|CheckpointCancel' -benchtime 20x -count 5

var (
	tree10k  = benchtree.Tree{Name: "10k", Dirs: 100, Files: 100, Size: 20 << 10, Ignore: "*.o\nbuild/\n"}  // 10,000 files, 200 MB
	tree100k = benchtree.Tree{Name: "100k", Dirs: 1000, Files: 100, Size: 2 << 10, Ignore: "*.o\nbuild/\n"} // 100,000 files, 200 MB
)

// cachedTree returns the workspace of tr, committed to git with a
// .gitignore, out of the snapshots' racy window; made on first use.
func cachedTree(b *testing.B, tr benchtree.Tree) string {
	b.Helper()
	return benchtree.Cached(b, tr, racyWindow+100*time.Millisecond)
}

// benchBash returns a bash tool of ws with a change store in dir.
func benchBash(b *testing.B, ws, storeDir string) *BashTool {
	b.Helper()
	store, err := changes.Open(storeDir, 0)
	if err != nil {
		b.Fatal(err)
	}
	bt, err := NewBash(Config{Root: ws, SpillDir: b.TempDir(), Changes: &changes.Recorder{Store: store}})
	if err != nil {
		b.Fatal(err)
	}
	if bt.snaps == nil {
		b.Skip("no checkpoints on this platform")
	}
	return bt
}

// callTimer runs a non-read bash command through a tool and times it.
func callTimer(b *testing.B, bt *BashTool, command string) func() time.Duration {
	return invocationTimer(b, bt, command, false)
}

// invocationTimer times command through a tool, as a call the broker
// admitted as a read (no checkpoint) when readOnly.
func invocationTimer(b *testing.B, bt *BashTool, command string, readOnly bool) func() time.Duration {
	raw := argsJSON(b, map[string]any{"command": command})
	return func() time.Duration {
		start := time.Now()
		res, err := bt.Execute(context.Background(), Invocation{CallID: "c", Arguments: raw, ReadOnly: readOnly})
		d := time.Since(start)
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", command, err, res)
		}
		return d
	}
}

// commandTimer times a command started directly in dir.
func commandTimer(b *testing.B, dir string, name string, args ...string) func() time.Duration {
	return func() time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return time.Since(start)
	}
}

// series collects one duration per iteration for each named timing.
type series map[string][]time.Duration

// report reports each series' median in ms and, for each ratio pair, the
// median of the per-iteration ratios.
func (s series) report(b *testing.B, ratios ...[2]string) {
	for name, ds := range s {
		b.ReportMetric(medianMS(slices.Clone(ds)), name+"-ms")
	}
	for _, r := range ratios {
		num, den := s[r[0]], s[r[1]]
		rs := make([]float64, len(num))
		for i := range num {
			rs[i] = float64(num[i]) / float64(den[i])
		}
		slices.Sort(rs)
		b.ReportMetric(rs[len(rs)/2], r[0]+"/"+r[1])
	}
}

// BenchmarkBashCheckpoint times a non-read bash call in steady state — the
// snapshot before the command, the command, the snapshot after — in a
// large workspace, beside the same call in an empty workspace, the call
// admitted as a read (no checkpoint: "read"), `bash -c true` and git
// status of the large tree, each call after callPause. The target:
// call/empty ≤ 1.5.
// With one file changed by the command ("one-changed"), the same for
// `echo >> file` in both workspaces.
func BenchmarkBashCheckpoint(b *testing.B) {
	for _, tr := range []benchtree.Tree{tree10k, tree100k} {
		b.Run(tr.Name, func(b *testing.B) {
			ws := cachedTree(b, tr)
			big := benchBash(b, ws, b.TempDir())
			defer big.Close()
			emptyWS := b.TempDir()
			empty := benchBash(b, emptyWS, b.TempDir())
			defer empty.Close()
			for _, cmd := range []string{"true", "echo x >> pkg042/f042.txt"} {
				name := "unchanged"
				if cmd != "true" {
					name = "one-changed"
					os.MkdirAll(filepath.Join(emptyWS, "pkg042"), 0o755)
				}
				b.Run(name, func(b *testing.B) {
					bigCall, emptyCall := afterPause(callTimer(b, big, cmd)), afterPause(callTimer(b, empty, cmd))
					bigCall() // the first snapshot of the tree (untimed)
					emptyCall()
					waitMarked(big.snaps) // steady state: the files' watches in place
					bash := commandTimer(b, ws, "bash", "-c", "true")
					git := commandTimer(b, ws, "git", "status", "--porcelain")
					read := afterPause(invocationTimer(b, empty, "true", true))
					s := series{}
					for i := 0; b.Loop(); i++ {
						s["git"] = append(s["git"], git())
						s["bash"] = append(s["bash"], bash())
						// Whichever runs right after git status is slower
						// (caches): the two calls take turns.
						if i%2 == 0 {
							s["call"] = append(s["call"], bigCall())
							s["empty"] = append(s["empty"], emptyCall())
						} else {
							s["empty"] = append(s["empty"], emptyCall())
							s["call"] = append(s["call"], bigCall())
						}
						s["read"] = append(s["read"], read())
					}
					s.report(b, [2]string{"call", "empty"}, [2]string{"call", "read"}, [2]string{"call", "bash"}, [2]string{"call", "git"})
				})
			}
			if err := exec.Command("git", "-C", ws, "checkout", "-q", "--", ".").Run(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// callPause is how long a benchmark idles (untimed) before a timed call,
// as a call follows a model's turn: by then the spare guard the call
// before started is ready (internal/proc/spare.go), for each call alike.
const callPause = 20 * time.Millisecond

// afterPause returns timer preceded by callPause.
func afterPause(timer func() time.Duration) func() time.Duration {
	return func() time.Duration {
		time.Sleep(callPause)
		return timer()
	}
}

// waitMarked waits for s's marker to end.
func waitMarked(s *snapshotter) {
	for {
		s.mu.Lock()
		m := s.marker
		s.mu.Unlock()
		if m == nil {
			return
		}
		<-m.done
	}
}

// BenchmarkBashFirstCall times the first bash call of a process in a
// large workspace, beside git status of the same tree: "walk", the first
// snapshot a process takes (from the store's snapshot head: one walk
// with the change feed set up on the directories, no file read), which a
// process takes ahead as soon as its first bash tool exists; "call", a
// call made at once (it waits for that snapshot); "warm", a call made
// once it is taken and the marker has watched the files. The target:
// call/git ≤ 1.2. "write" is a call made like "warm" that writes a file:
// the process's first write to the change store.
func BenchmarkBashFirstCall(b *testing.B) {
	for _, tr := range []benchtree.Tree{tree10k, tree100k} {
		b.Run(tr.Name, func(b *testing.B) {
			ws := cachedTree(b, tr)
			storeDir := b.TempDir()
			store, err := changes.Open(storeDir, 0)
			if err != nil {
				b.Fatal(err)
			}
			walk := firstWalkTimer(b, ws, store)
			b.Logf("the store's first snapshot (every file read and kept): %v", walk())
			call := func(wait int, command string) time.Duration {
				// A new process has no spare guard yet: the tool's
				// starts one beside the walk. The one its call's end
				// starts is stopped too, not to run beside the next
				// iteration's git status and walk.
				proc.StopSpares()
				defer proc.StopSpares()
				bt := benchBash(b, ws, storeDir)
				defer bt.Close()
				if command != "true" {
					// The count of the store's blobs the first write
					// begins (in the background, once a process) ends
					// before the next timing begins.
					defer func() { <-bt.snaps.store.Counted() }()
				}
				switch wait {
				case afterTurn:
					time.Sleep(modelTurn)
					bt.WarmUp() // the request is out; the model answers at once
				case afterMarked:
					<-bt.snaps.warmDone
					waitMarked(bt.snaps)
				}
				return callTimer(b, bt, command)()
			}
			git := commandTimer(b, ws, "git", "status", "--porcelain")
			s := series{}
			for i := 0; b.Loop(); i++ {
				if i%2 == 0 { // taking turns to run first
					s["git"] = append(s["git"], git())
					s["walk"] = append(s["walk"], walk())
				} else {
					s["walk"] = append(s["walk"], walk())
					s["git"] = append(s["git"], git())
				}
				s["call"] = append(s["call"], call(atOnce, "true"))
				s["turn"] = append(s["turn"], call(afterTurn, "true"))
				s["warm"] = append(s["warm"], call(afterMarked, "true"))
				s["write"] = append(s["write"], call(afterMarked, "echo x >> pkg042/f042.txt"))
			}
			s.report(b, [2]string{"call", "git"}, [2]string{"turn", "git"}, [2]string{"walk", "git"}, [2]string{"warm", "git"}, [2]string{"write", "git"})
		})
	}
}

// When BenchmarkBashFirstCall's call is made: as soon as the tool
// exists; as soon as the first model request is out (WarmUp) in a
// process started a while before — its spare guard started, its first
// snapshot not begun (octet exec sends its first request 84 ms after it
// starts in a 10k-file workspace) — as when the model answers at once;
// or once the first snapshot is taken and its files marked.
const (
	atOnce = iota
	afterTurn
	afterMarked
)

// modelTurn is how long before its first request a process made its
// bash tool: well under prewarmDelay, past a guard's start.
const modelTurn = 50 * time.Millisecond

// firstWalkTimer times the first snapshot of a new snapshotter of ws
// with store.
func firstWalkTimer(b *testing.B, ws string, store *changes.Store) func() time.Duration {
	return func() time.Duration {
		s := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: store}})
		defer s.close()
		start := time.Now()
		if _, err := s.take(context.Background(), takeOptions{}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
}

// BenchmarkFirstWalk times a process's first snapshot of a large
// workspace alone ("walk", the BenchmarkBashFirstCall series), beside git
// status, with the store kept between runs (beside the cached tree) and
// no marker after it, so that a profile of it is the walk's:
//
//	go test ./tools -run '^$' -bench 'FirstWalk/100k' -benchtime 30x -cpuprofile cpu.out
func BenchmarkFirstWalk(b *testing.B) {
	for _, tr := range []benchtree.Tree{tree10k, tree100k} {
		b.Run(tr.Name, func(b *testing.B) {
			ws, store := keptStore(b, tr)
			walk := firstWalkTimer(b, ws, store)
			// The marker would watch every file after each walk: its work
			// is not the walk's.
			defer func(on bool) { markerRuns = on }(markerRuns)
			markerRuns = false
			git := commandTimer(b, ws, "git", "status", "--porcelain")
			s := series{}
			for b.Loop() {
				s["walk"] = append(s["walk"], walk())
				s["git"] = append(s["git"], git())
			}
			s.report(b, [2]string{"walk", "git"})
		})
	}
}

// keptStore returns the cached tree tr and the change store kept beside
// it, with a snapshot head: its own first walk's when it is new.
func keptStore(b *testing.B, tr benchtree.Tree) (string, *changes.Store) {
	ws := cachedTree(b, tr)
	store, err := changes.Open(ws+".store", 0)
	if err != nil {
		b.Fatal(err)
	}
	firstWalkTimer(b, ws, store)()
	return ws, store
}

// BenchmarkHeadRead times reading the snapshot head of a large
// workspace into each directory's entries, as a new process's first walk
// does beside its listing (the store kept beside the cached tree).
func BenchmarkHeadRead(b *testing.B) {
	for _, tr := range []benchtree.Tree{tree10k, tree100k} {
		b.Run(tr.Name, func(b *testing.B) {
			ws, store := keptStore(b, tr)
			b.ReportAllocs()
			for b.Loop() {
				s := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: store}})
				if h, _ := s.seed(); h == nil {
					b.Fatal("no snapshot head")
				}
				s.close()
			}
		})
	}
}

// BenchmarkCheckpointCancel measures how long a first checkpoint of the
// 10k tree (every file read and kept) takes to return once its call is
// cancelled 100 ms in.
func BenchmarkCheckpointCancel(b *testing.B) {
	ws := cachedTree(b, tree10k)
	var lat []time.Duration
	for b.Loop() {
		store, err := changes.Open(b.TempDir(), 0)
		if err != nil {
			b.Fatal(err)
		}
		s := newSnapshotter(Config{Root: ws, Changes: &changes.Recorder{Store: store}})
		ctx, cancel := context.WithCancel(context.Background())
		var at time.Time
		timer := time.AfterFunc(100*time.Millisecond, func() { at = time.Now(); cancel() })
		_, err = s.take(ctx, takeOptions{})
		if err == nil {
			b.Fatal("not cancelled")
		}
		lat = append(lat, time.Since(at))
		timer.Stop()
		s.close()
	}
	slices.Sort(lat)
	b.ReportMetric(medianMS(slices.Clone(lat)), "median-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// medianMS returns the median of ds in milliseconds.
func medianMS(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Microseconds()) / 1000
}
