package session

import (
	"bytes"
	"testing"
)

// BenchmarkDecodeFlatRecords decodes the accounting records of one
// provider request as opening folds them (decodeBody into one scratch):
// its dispatch, the dispatch's settlement, a usage_uncertain marker, a
// recovered output and the run's checkpoint, then encodes them again.
func BenchmarkDecodeFlatRecords(b *testing.B) {
	recs := []Record{
		DispatchRecord(Dispatch{ID: "d_0123456789ab", RunID: "run_0123456789", Operation: "turn", Model: "gpt-5", Attempt: 2}),
		SettledRecord(DispatchSettled{ID: "d_0123456789ab", RunID: "run_0123456789", Outcome: SettledUsage}),
		UncertainRecord(UsageUncertain{RunID: "run_0123456789", Operation: "turn", Reason: "stream_cut", Dispatched: true, Attempt: 1}),
		RecoveredRecord(RecoveredOutput{RunID: "run_0123456789", Channel: "text", Text: "partial answer that was cut", Attempt: 1}),
		CheckpointRecord(Checkpoint{RunID: "run_0123456789", Outcome: OutcomeCompleted}),
	}
	var lines [][]byte
	for _, r := range recs {
		line, err := appendRecord(nil, r, 0, 1)
		if err != nil {
			b.Fatal(err)
		}
		lines = append(lines, bytes.TrimSuffix(line, []byte("\n")))
	}
	var a strAlloc
	var sc bodyScratch
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		for i, line := range lines {
			r, err := decodeBody(recs[i].Kind, line, &a, &sc)
			if err != nil {
				b.Fatal(err)
			}
			buf, _ = appendRecord(buf[:0], r, 0, 1)
		}
	}
}
