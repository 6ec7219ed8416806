package provider_test

import (
	"context"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/octet-agent/octet/provider"
	pt "github.com/octet-agent/octet/provider/providertest"
)

// steerConn opens one response on a WebSocket to srv.
func steerConn(t *testing.T, srv *pt.Server) (*provider.WebSocket, provider.SteeringStream) {
	t.Helper()
	ws := provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), APIKey: testKey})
	t.Cleanup(func() { ws.Close() })
	st, err := ws.Open(context.Background(), &provider.Request{Model: "m", Input: []provider.Item{{Type: provider.ItemMessage, Role: "user", Text: "plan it"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ss, ok := st.(provider.SteeringStream)
	if !ok {
		t.Fatal("a WebSocket stream takes no steering input")
	}
	return ws, ss
}

// next reads events until one of type want (failing on an error) and
// returns it.
func nextOf(t *testing.T, st provider.Stream, want provider.EventType) provider.Event {
	t.Helper()
	for {
		ev, err := st.Next(context.Background())
		if err != nil {
			t.Fatalf("waiting for %s: %v", want, err)
		}
		if ev.Type == want {
			return ev
		}
		if ev.Type == provider.EventCompleted && want != provider.EventCompleted {
			t.Fatalf("the stream completed before %s", want)
		}
	}
}

// TestSteerInterruptsAndContinues is the documented native steering wire
// without tools: after response.created the client sends
// {type: response.steer, previous_response_id, input} on the same socket;
// the server accepts it, ends the response as incomplete with reason
// "steered" (EventSegmentDone, its usage its own), and the successor
// follows on the same stream, whose end (EventCompleted) ends the stream
// and frees the connection for the next request.
func TestSteerInterruptsAndContinues(t *testing.T) {
	srv := pt.New(t)
	srv.Enqueue(pt.Text("a long plan").SteerAfter(1, true, pt.Text("a short plan")), pt.Text("next"))
	ws, st := steerConn(t, srv)
	if err := st.Steer(context.Background(), "too early"); err == nil {
		t.Fatal("Steer before response.created succeeded")
	}
	created := nextOf(t, st, provider.EventCreated)
	if err := st.Steer(context.Background(), "keep it short"); err != nil {
		t.Fatalf("Steer: %v", err)
	}
	acc := nextOf(t, st, provider.EventSteerAccepted)
	if acc.Steer == nil || acc.Steer.ID == "" || acc.Steer.PreviousResponseID != created.Response.ID {
		t.Fatalf("accepted %+v", acc.Steer)
	}
	seg := nextOf(t, st, provider.EventSegmentDone)
	if seg.Response.IncompleteReason != "steered" || seg.Response.Usage == nil {
		t.Fatalf("segment %+v", seg.Response)
	}
	succ := nextOf(t, st, provider.EventCreated)
	if succ.Response.ID != "resp_successor" {
		t.Fatalf("successor %+v", succ.Response)
	}
	done := nextOf(t, st, provider.EventCompleted)
	if len(done.Response.Output) != 1 || done.Response.Output[0].Text != "a short plan" {
		t.Fatalf("successor output %+v", done.Response.Output)
	}
	if _, err := st.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("after the successor: %v", err)
	}
	if err := st.Steer(context.Background(), "late"); !errors.Is(err, provider.ErrSteeringUnavailable) {
		t.Fatalf("Steer after the end: %v", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d client events, want response.create and response.steer", len(reqs))
	}
	want := map[string]any{"type": "response.steer", "previous_response_id": created.Response.ID, "input": "keep it short"}
	if !reflect.DeepEqual(reqs[1].Body, want) {
		t.Fatalf("steer frame %v, want %v", reqs[1].Body, want)
	}
	st2, err := ws.Open(context.Background(), &provider.Request{Model: "m"})
	if err != nil {
		t.Fatalf("the connection is not free after the successor: %v", err)
	}
	defer st2.Close()
	nextOf(t, st2, provider.EventCompleted)
	if r := srv.Requests(); r[2].RemoteAddr != r[0].RemoteAddr {
		t.Error("the next request went over another connection")
	}
}

// TestSteerWaitsForToolResults: a response that ends with a function
// call keeps the accepted input pending (EventSteerPending names the
// call); Continue sends the outputs as response.create with the
// response's previous_response_id on the same socket, without the
// steering input, and the successor follows.
func TestSteerWaitsForToolResults(t *testing.T) {
	srv := pt.New(t)
	srv.Enqueue(pt.Reply(pt.FunctionCall("c1", "read", `{"path":"a"}`)).SteerAfter(1, false, pt.Text("done")))
	_, st := steerConn(t, srv)
	created := nextOf(t, st, provider.EventCreated)
	if err := st.Continue(context.Background(), &provider.Request{Model: "m"}); !errors.Is(err, provider.ErrSteeringUnavailable) {
		t.Fatalf("Continue without an accepted input: %v", err)
	}
	if err := st.Steer(context.Background(), "also check b"); err != nil {
		t.Fatal(err)
	}
	nextOf(t, st, provider.EventSteerAccepted)
	seg := nextOf(t, st, provider.EventSegmentDone)
	if seg.Response.Status != "completed" || len(seg.Response.Output) != 1 {
		t.Fatalf("segment %+v", seg.Response)
	}
	if err := st.Steer(context.Background(), "between"); !errors.Is(err, provider.ErrSteeringUnavailable) {
		t.Fatalf("Steer between responses: %v", err)
	}
	pend := nextOf(t, st, provider.EventSteerPending)
	if !reflect.DeepEqual(pend.Steer.RequiredCallIDs, []string{"c1"}) || pend.Steer.Reason != "waiting_for_required_input" {
		t.Fatalf("pending %+v", pend.Steer)
	}
	out := provider.Item{Type: provider.ItemFunctionCallOutput, CallID: "c1", Output: "alpha"}
	if err := st.Continue(context.Background(), &provider.Request{Model: "m", Input: []provider.Item{out}}); err != nil {
		t.Fatalf("Continue: %v", err)
	}
	nextOf(t, st, provider.EventCreated)
	nextOf(t, st, provider.EventCompleted)
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d client events", len(reqs))
	}
	cont := reqs[2].Body
	if cont["type"] != "response.create" || cont["previous_response_id"] != created.Response.ID {
		t.Fatalf("continuation %v", cont)
	}
	in := reqs[2].Input()
	if len(in) != 1 || in[0].(map[string]any)["type"] != "function_call_output" {
		t.Fatalf("continuation input %v: want the output only, never the steering input again", in)
	}
}

// TestSteerRefused: response.steer.failed is EventSteerFailed with the
// error code; the response ends the stream as usual.
func TestSteerRefused(t *testing.T) {
	srv := pt.New(t)
	srv.Enqueue(pt.Text("plan").SteerRefusedAfter(1, "steering_not_supported"))
	_, st := steerConn(t, srv)
	nextOf(t, st, provider.EventCreated)
	if err := st.Steer(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	f := nextOf(t, st, provider.EventSteerFailed)
	if f.Steer.Code != "steering_not_supported" {
		t.Fatalf("failed %+v", f.Steer)
	}
	nextOf(t, st, provider.EventCompleted)
	if _, err := st.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("after completion: %v", err)
	}
}

// TestContinuationOnlyOnItsSocket: a request with previous_response_id is
// refused pre-send by HTTP and by WebSocket.Open (only Continue, on the
// connection holding the response, sends one).
func TestContinuationOnlyOnItsSocket(t *testing.T) {
	srv := pt.New(t)
	req := &provider.Request{Model: "m", PreviousResponseID: "resp_1"}
	for name, tr := range map[string]provider.Transport{
		"http":      provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL(), APIKey: testKey}),
		"websocket": provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL(), APIKey: testKey}),
	} {
		_, err := tr.Open(context.Background(), req)
		pe, ok := errors.AsType[*provider.Error](err)
		if !ok || pe.Class != provider.InvalidRequest || pe.Dispatched || !errors.Is(err, provider.ErrContinuationNotWebSocket) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests", n)
	}
}
