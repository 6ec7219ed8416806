package provider

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// syntheticStream renders a realistic Responses SSE body with n text
// deltas (the fields and sizes of the recorded gpt-5 streams: item_id,
// output_index, content_index, delta, logprobs, obfuscation,
// sequence_number), framed by created/item/completed events.
func syntheticStream(n int) []byte {
	var b bytes.Buffer
	item := "msg_0a63f40a2632b74300699f8819a5e08196ac270722d369af5a"
	fmt.Fprintf(&b, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-5.1-codex\",\"output\":[],\"usage\":null}}\n\n")
	fmt.Fprintf(&b, "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":%q,\"type\":\"message\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}\n\n", item)
	words := []string{" the", " quick", " brown", " fox", " jumps", " over", " lazy", " dogs", "\\n", " ✓"}
	for i := range n {
		fmt.Fprintf(&b, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":%q,\"output_index\":0,\"content_index\":0,\"delta\":%q,\"logprobs\":[],\"obfuscation\":\"qXa9kL2\"}\n\n", i+2, item, words[i%len(words)])
	}
	fmt.Fprintf(&b, "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":%d,\"output_index\":0,\"item\":{\"id\":%q,\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"short\",\"annotations\":[]}]}}\n\n", n+2, item)
	fmt.Fprintf(&b, "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":%d,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":10,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":%d,\"output_tokens_details\":{\"reasoning_tokens\":0}}}}\n\n", n+3, n)
	return b.Bytes()
}

// decodeAll parses and decodes a whole body as the HTTP stream does.
func decodeAll(body []byte) (int, error) {
	r := NewSSEReader(bytes.NewReader(body), 0)
	var d decoder
	n := 0
	for {
		f, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		ev, st, derr := d.decode(f.Data)
		if derr != nil {
			return n, derr
		}
		if st.emit && ev.Type == EventTextDelta {
			n++
		}
	}
}

// rawLines is the baseline: a bufio line read of the same bytes.
func rawLines(body []byte) int {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n += len(sc.Bytes())
	}
	return n
}

// BenchmarkSSEDecodeVsBufio measures full SSE parse + event decode of a
// 20,000-delta stream against a raw bufio.Scanner line read of the same
// bytes in the same iteration, and reports the ratio.
func BenchmarkSSEDecodeVsBufio(b *testing.B) {
	const deltas = 20_000
	body := syntheticStream(deltas)
	b.SetBytes(int64(len(body)))
	var tDecode, tRaw time.Duration
	for b.Loop() {
		t0 := time.Now()
		if rawLines(body) == 0 {
			b.Fatal("no lines")
		}
		t1 := time.Now()
		n, err := decodeAll(body)
		if err != nil || n != deltas {
			b.Fatalf("decoded %d deltas: %v", n, err)
		}
		tRaw += t1.Sub(t0)
		tDecode += time.Since(t1)
	}
	mb := float64(len(body)) * float64(b.N) / 1e6
	b.ReportMetric(mb/tDecode.Seconds(), "decode-MB/s")
	b.ReportMetric(mb/tRaw.Seconds(), "bufio-MB/s")
	b.ReportMetric(float64(tDecode)/float64(tRaw), "decode/bufio")
}

// BenchmarkSSEReaderOnly isolates the SSE framing layer (no JSON).
func BenchmarkSSEReaderOnly(b *testing.B) {
	body := syntheticStream(20_000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewSSEReader(bytes.NewReader(body), 0)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

// bodyRT serves a fixed SSE body in process.
type bodyRT struct{ body []byte }

func (rt bodyRT) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(rt.body)), Request: r}, nil
}

// BenchmarkStreamAllocsPerTextDelta runs the whole HTTP stream path
// (Open, Next per event) over an in-memory body and reports heap
// allocations and nanoseconds per text delta, for the fast delta decoder
// and, as the baseline, the general encoding/json decoder.
func BenchmarkStreamAllocsPerTextDelta(b *testing.B) {
	for _, mode := range []struct {
		name   string
		noFast bool
	}{{"fast", false}, {"general-json", true}} {
		b.Run(mode.name, func(b *testing.B) { benchStream(b, mode.noFast) })
	}
}

func benchStream(b *testing.B, noFast bool) {
	const deltas = 5_000
	body := syntheticStream(deltas)
	tr := NewHTTP(HTTPConfig{BaseURL: "http://127.0.0.1:9/v1", RoundTripper: bodyRT{body}})
	req := &Request{Model: "gpt-5.1-codex"}
	ctx := context.Background()
	var ms0, ms1 runtime.MemStats
	var allocs uint64
	var elapsed time.Duration
	for b.Loop() {
		runtime.ReadMemStats(&ms0)
		t0 := time.Now()
		st, err := tr.Open(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		st.(*httpStream).dec.(*decoder).noFast = noFast
		n := 0
		for {
			ev, err := st.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if ev.Type == EventTextDelta {
				n++
			}
		}
		st.Close()
		elapsed += time.Since(t0)
		runtime.ReadMemStats(&ms1)
		allocs += ms1.Mallocs - ms0.Mallocs
		if n != deltas {
			b.Fatalf("%d deltas", n)
		}
	}
	b.ReportMetric(float64(allocs)/float64(b.N*deltas), "allocs/delta")
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*deltas), "ns/delta")
}
