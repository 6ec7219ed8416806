package provider_test

import (
	"context"
	"io"
	"testing"

	"github.com/octet-agent/octet/provider"
	"github.com/octet-agent/octet/provider/providertest"
)

func TestSmoke(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Reply(providertest.Reasoning("enc", "think hard"), providertest.Message("hello world"), providertest.FunctionCall("c1", "read", `{"path":"a.go"}`)))
	tr := provider.NewHTTP(provider.HTTPConfig{BaseURL: srv.URL()})
	st, err := tr.Open(context.Background(), &provider.Request{Model: "gpt-5", Input: []provider.Item{{Type: provider.ItemMessage, Role: "user", Text: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		ev, err := st.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v %q %+v", ev.Type, ev.Delta, ev.Response)
	}
}

func TestSmokeWS(t *testing.T) {
	srv := providertest.New(t)
	srv.Enqueue(providertest.Text("hello world"), providertest.Text("second turn"))
	tr := provider.NewWebSocket(provider.WSConfig{BaseURL: srv.URL()})
	defer tr.Close()
	for range 2 {
		st, err := tr.Open(context.Background(), &provider.Request{Model: "gpt-5"})
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := st.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%v %q", ev.Type, ev.Delta)
		}
		st.Close()
	}
	t.Logf("%+v", srv.Requests())
}
