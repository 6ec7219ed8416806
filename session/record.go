package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unsafe"
)

// Encoding puts "kind" first and, for entries, "id" and "parent" right
// after it, so the opening scanner finds them at the start of each line.

// appendHeader appends the header line (with its newline).
func appendHeader(b []byte, h Header) []byte {
	b = append(b, `{"kind":"header"`...)
	b = strconv.AppendInt(appendKey(b, "version"), int64(h.Version), 10)
	b = appendStrField(b, "id", h.ID)
	b = appendTimeField(b, "created", h.Created)
	b = appendStrField(b, "cwd", h.Cwd)
	b = appendStrField(b, "title", h.Title)
	if h.ForkOf != "" {
		b = appendStrField(b, "fork_of", h.ForkOf)
		b = appendStrField(b, "fork_entry", h.ForkEntry)
	}
	return append(b, '}', '\n')
}

func appendTimeField(b []byte, key string, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = append(appendKey(b, key), '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendRecord appends one record line (with its newline): the record at
// 0-based position at of a batch of n records written with one write. For
// n > 1 the first record carries "batch":n and every later one
// "batch_of":n,"batch_index":at+1. Readers treat the batch as one unit, so
// a torn batch is dropped as a whole; the members' own marks let them tell
// a batch cut short by a crash from a damaged "batch" mark, so damage can
// never pass for a torn tail and discard complete records.
func appendRecord(b []byte, r Record, at, n int) ([]byte, error) {
	if err := r.validate(); err != nil {
		return b, err
	}
	b = append(b, `{"kind":`...)
	b = appendString(b, r.Kind)
	switch {
	case n > 1 && at == 0:
		b = strconv.AppendInt(appendKey(b, "batch"), int64(n), 10)
	case n > 1:
		b = strconv.AppendInt(appendKey(b, "batch_of"), int64(n), 10)
		b = strconv.AppendInt(appendKey(b, "batch_index"), int64(at+1), 10)
	}
	switch r.Kind {
	case KindEntry:
		return appendEntry(b, r.Entry)
	case KindHead:
		b = appendStrField(b, "head", r.Head)
	case KindUsage:
		b = appendUsage(b, r.Usage)
	case KindUsageUncertain:
		u := r.Uncertain
		b = appendStrField(b, "run_id", u.RunID)
		b = appendStrField(b, "operation", u.Operation)
		b = appendStrField(b, "reason", u.Reason)
		b = appendBoolField(b, "dispatched", u.Dispatched)
		b = appendIntField(b, "attempt", int64(u.Attempt))
	case KindCheckpoint:
		c := r.Checkpoint
		b = appendStrField(b, "run_id", c.RunID)
		b = appendStrField(b, "outcome", c.Outcome)
		b = appendStrField(b, "error", c.Error)
	case KindDelegatedUsage:
		dl := r.Delegated
		b = appendStrField(b, "child_session", dl.ChildSession)
		// A child's uncertainty comes before its known subtotal, so no
		// reader meets the subtotal without knowing it is one.
		b = appendBoolField(b, "uncertain", dl.Uncertain)
		b = append(appendKey(b, "usage"), '{')
		mark := len(b)
		b = appendUsage(b, &dl.Usage)
		if len(b) > mark {
			// appendUsage writes a leading comma before each member.
			b = append(b[:mark], b[mark+1:]...)
		}
		b = append(b, '}')
	case KindDispatch, KindDispatchSettled, KindRecoveredOutput:
		b = appendDispatchBody(b, r)
	case KindTitle:
		b = appendStrField(b, "title", r.Title)
	case KindApproval:
		var err error
		if b, err = appendJSONBody(b, KindApproval, r.Approval); err != nil {
			return b, err
		}
	case KindReasoning:
		var err error
		if b, err = appendJSONBody(b, KindReasoning, r.Reasoning); err != nil {
			return b, err
		}
	}
	return append(b, '}', '\n'), nil
}

func appendUsage(b []byte, u *Usage) []byte {
	b = appendStrField(b, "run_id", u.RunID)
	b = appendStrField(b, "request_id", u.RequestID)
	b = appendStrField(b, "operation", u.Operation)
	b = appendStrField(b, "model", u.Model)
	b = appendIntField(b, "input", u.Input)
	b = appendIntField(b, "cached_input", u.CachedInput)
	b = appendIntField(b, "output", u.Output)
	b = appendIntField(b, "reasoning", u.Reasoning)
	b = appendIntField(b, "cost_picodollars", u.CostPicodollars)
	b = appendBoolField(b, "priced", u.Priced)
	return b
}

func appendEntry(b []byte, e *Entry) ([]byte, error) {
	b = appendStrField(b, "id", e.ID)
	b = appendStrField(b, "parent", e.Parent)
	b = appendTimeField(b, "time", e.Time)
	b = appendStrField(b, "type", string(e.Type))
	b = appendStrField(b, "run_id", e.RunID)
	b = appendStrField(b, "text", e.Text)
	b = appendImages(b, e.PromptImages())
	b = appendItems(b, e.Items)
	b = appendStrField(b, "stop_reason", e.StopReason)
	if n := e.NativeSteering; n != nil {
		b = append(appendKey(b, "native_steering"), `{"operation":`...)
		b = appendString(b, n.Operation)
		b = appendStrField(b, "local_id", n.LocalID)
		b = append(b, '}')
	}
	if r := e.Result; r != nil {
		b = append(appendKey(b, "result"), `{"call_id":`...)
		b = appendString(b, r.CallID)
		b = appendStrField(b, "tool", r.Tool)
		b = appendStrField(b, "text", r.Text)
		b = appendBoolField(b, "is_error", r.IsError)
		b = appendImages(b, r.ResultImages())
		if len(r.Details) > 0 {
			raw, err := json.Marshal(r.Details)
			if err != nil {
				return b, fmt.Errorf("encode tool result details: %w", err)
			}
			b = append(appendKey(b, "details"), raw...)
		}
		b = append(b, '}')
	}
	if c := e.Compaction; c != nil {
		b = append(appendKey(b, "compaction"), `{"summary":`...)
		b = appendString(b, c.Summary)
		b = appendStrField(b, "first_kept", c.FirstKept)
		b = appendStrings(b, "readFiles", c.ReadFiles)
		b = appendStrings(b, "modifiedFiles", c.ModifiedFiles)
		b = appendIntField(b, "tokens_before", c.TokensBefore)
		b = appendItems(b, c.Items)
		b = append(b, '}')
	}
	return append(b, '}', '\n'), nil
}

// appendImages appends the "images" member unless there are none.
func appendImages(b []byte, imgs []Image) []byte {
	if len(imgs) == 0 {
		return b
	}
	b = append(appendKey(b, "images"), '[')
	for i, im := range imgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"mime_type":`...)
		b = appendString(b, im.MimeType)
		b = appendStrField(b, "sha256", im.SHA256)
		b = appendIntField(b, "bytes", im.Bytes)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendItems appends the "items" member unless there are none.
func appendItems(b []byte, items []Item) []byte {
	if len(items) == 0 {
		return b
	}
	b = append(appendKey(b, "items"), '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendItem(b, &items[i])
	}
	return append(b, ']')
}

func appendItem(b []byte, it *Item) []byte {
	b = append(b, `{"type":`...)
	b = appendString(b, it.Type)
	b = appendStrField(b, "id", it.ID)
	b = appendStrField(b, "text", it.Text)
	b = appendStrField(b, "phase", it.Phase)
	b = appendStrField(b, "encrypted_content", it.EncryptedContent)
	b = appendStrField(b, "call_id", it.CallID)
	b = appendStrField(b, "name", it.Name)
	b = appendStrField(b, "arguments", it.Arguments)
	b = appendBoolField(b, "async", it.Async)
	return append(b, '}')
}

// meta is what the opening scanner takes from a line. The slices alias the
// line (or a copy when the value had escapes) and are valid until the next
// scan.
type meta struct {
	kind, id, parent, head []byte
	// batch is the size of the batch this record opens (0 or 1: none).
	batch int64
	// batchOf and batchIndex place a later member of a batch: its size and
	// the member's 1-based position (2..batchOf); 0 outside a batch.
	batchOf, batchIndex int64
}

// scanMeta extracts the top-level kind, id, parent, head and batch of one
// record line (without its newline), skipping every other value without
// decoding it. With full set it checks the structure of the whole line.
// Otherwise, for an entry written in canonical order ("kind" first, then
// "batch", "id" and "parent" before any other member, as the encoder
// writes), it stops at the first other member: the rest of an entry is
// checked when the entry is decoded, which opening does for the whole
// active branch.
func scanMeta(line []byte, m *meta, full bool) error {
	if !full && scanMetaFast(line, m) {
		return nil
	}
	return scanMetaGeneral(line, m, full)
}

// scanMetaGeneral is scanMeta for any line.
func scanMetaGeneral(line []byte, m *meta, full bool) error {
	*m = meta{}
	d := decoder{b: line}
	if !d.eat('{') {
		d.mismatch("expected object")
		return d.err
	}
	canonical := true
	for first := true; d.err == nil; first = false {
		if first && d.eat('}') {
			break
		}
		if d.peek() != '"' {
			d.fail("expected object key")
			break
		}
		key := d.strBytes()
		if !d.eat(':') {
			d.fail("expected ':'")
			break
		}
		var dst *[]byte
		switch string(key) {
		case "kind":
			canonical = first
			dst = &m.kind
		case "id":
			dst = &m.id
		case "parent":
			dst = &m.parent
		case "head":
			dst = &m.head
		case "batch":
			m.batch = d.int()
		case "batch_of":
			m.batchOf = d.int()
		case "batch_index":
			m.batchIndex = d.int()
		default:
			if !full && canonical {
				switch string(m.kind) {
				case KindEntry, KindUsage, KindUsageUncertain, KindCheckpoint, KindDelegatedUsage,
					KindDispatch, KindDispatchSettled, KindRecoveredOutput:
					// The rest is checked when the record is decoded.
					return nil
				}
			}
			d.skip(0)
		}
		if dst != nil {
			v := d.strBytes()
			if len(d.scratch) > 0 && len(v) > 0 && &v[0] == &d.scratch[0] {
				v = append([]byte(nil), v...) // escaped: detach from scratch
				d.scratch = nil
			}
			*dst = v
		}
		if d.eat(',') {
			continue
		}
		if !d.eat('}') {
			d.fail("expected ',' or '}'")
		}
		break
	}
	d.end()
	if d.err != nil {
		return d.err
	}
	if len(m.kind) == 0 {
		return fmt.Errorf("record without kind")
	}
	if m.batch < 0 || m.batch > int64(MaxRecords) {
		return fmt.Errorf("invalid batch size %d", m.batch)
	}
	if m.batchOf != 0 || m.batchIndex != 0 {
		if m.batch != 0 || m.batchOf < 2 || m.batchOf > int64(MaxRecords) || m.batchIndex < 2 || m.batchIndex > m.batchOf {
			return fmt.Errorf("invalid batch member mark %d of %d", m.batchIndex, m.batchOf)
		}
	}
	return nil
}

// scanMetaFast is scanMeta without full for the exact shapes the encoder
// writes for entries and usage records (no whitespace, ids in NewID's
// form, the members scanMeta reads first and then a member it stops at).
// It yields what scanMeta would and reports false for anything else,
// which scanMeta then reads the general way.
func scanMetaFast(line []byte, m *meta) bool {
	const kindAt = len(`{"kind":"`)
	b, ok := bytes.CutPrefix(line, []byte(`{"kind":"entry",`))
	if ok {
		var batch int64
		if rest, ok := bytes.CutPrefix(b, []byte(`"batch":`)); ok {
			if batch, b, ok = fastInt(rest); !ok {
				return false
			}
		}
		var id, parent []byte
		if id, b, ok = fastHexMember(b, `"id":"`); !ok {
			return false
		}
		if rest, ok := bytes.CutPrefix(b, []byte(`"parent":"`)); ok {
			if parent, b, ok = fastHexMember(rest, ``); !ok {
				return false
			}
		}
		if !bytes.HasPrefix(b, []byte(`"time":`)) {
			return false
		}
		*m = meta{kind: line[kindAt : kindAt+len(KindEntry)], id: id, parent: parent, batch: batch}
		return true
	}
	b, ok = bytes.CutPrefix(line, []byte(`{"kind":"usage",`))
	if !ok {
		return false
	}
	var of, index int64
	if rest, ok := bytes.CutPrefix(b, []byte(`"batch_of":`)); ok {
		if of, rest, ok = fastInt(rest); !ok {
			return false
		}
		if rest, ok = bytes.CutPrefix(rest, []byte(`"batch_index":`)); !ok {
			return false
		}
		if index, b, ok = fastInt(rest); !ok {
			return false
		}
	}
	if !bytes.HasPrefix(b, []byte(`"request_id":`)) && !bytes.HasPrefix(b, []byte(`"run_id":`)) {
		return false
	}
	*m = meta{kind: line[kindAt : kindAt+len(KindUsage)], batchOf: of, batchIndex: index}
	return true
}

// fastInt reads 1-9 decimal digits and the comma after them.
func fastInt(b []byte) (int64, []byte, bool) {
	var v int64
	n := 0
	for n < len(b) && n < 9 && '0' <= b[n] && b[n] <= '9' {
		v = v*10 + int64(b[n]-'0')
		n++
	}
	if n == 0 || n >= len(b) || b[n] != ',' {
		return 0, nil, false
	}
	return v, b[n+1:], true
}

// fastHexMember reads prefix, a 16-digit lower-case hex string and `",`.
func fastHexMember(b []byte, prefix string) (id, rest []byte, ok bool) {
	b, ok = bytes.CutPrefix(b, []byte(prefix))
	if !ok || len(b) < 18 || b[16] != '"' || b[17] != ',' {
		return nil, nil, false
	}
	if _, ok := hexID(b[:16]); !ok {
		return nil, nil, false
	}
	return b[:16], b[18:], true
}

// decodeHeader decodes a header line.
func decodeHeader(line []byte) (Header, error) {
	var h Header
	// The header's strings fit in the line: one block of its size, not
	// the shared 256 KiB arena, which each listed header would keep alive.
	a := strAlloc{buf: make([]byte, 0, len(line))}
	kind := ""
	d := decoder{b: line}
	d.obj(func(key []byte) {
		switch string(key) {
		case "kind":
			kind = d.str(&a)
		case "version":
			h.Version = int(d.int())
		case "id":
			h.ID = d.str(&a)
		case "created":
			h.Created = d.time()
		case "cwd":
			h.Cwd = d.str(&a)
		case "title":
			h.Title = d.str(&a)
		case "fork_of":
			h.ForkOf = d.str(&a)
		case "fork_entry":
			h.ForkEntry = d.str(&a)
		default:
			d.skip(0)
		}
	})
	d.end()
	if d.err != nil {
		return h, d.err
	}
	if kind != KindHeader {
		return h, fmt.Errorf("first record is %q, not a header", kind)
	}
	if h.ID == "" {
		return h, fmt.Errorf("header without session id")
	}
	if h.Version < 1 {
		return h, fmt.Errorf("header without valid format version")
	}
	return h, nil
}

func (d *decoder) time() time.Time {
	s := d.strBytes()
	if d.err != nil || len(s) == 0 {
		return time.Time{}
	}
	// The string does not outlive the call: a parse error is dropped.
	t, err := time.Parse(time.RFC3339Nano, unsafe.String(unsafe.SliceData(s), len(s)))
	if err != nil {
		d.failSchema("invalid time")
		return time.Time{}
	}
	return t
}

// decodeRecord decodes one non-header line. A record of a kind this
// version does not know yields a Record with only Kind set.
func decodeRecord(line []byte, a *strAlloc) (Record, error) {
	var m meta
	if err := scanMeta(line, &m, true); err != nil {
		return Record{}, err
	}
	switch kind := string(m.kind); kind {
	case KindEntry:
		e, err := decodeEntry(line, a)
		if err != nil {
			return Record{}, err
		}
		return Record{Kind: kind, Entry: &e}, nil
	case KindHead:
		if len(m.head) == 0 {
			return Record{}, fmt.Errorf("head record without entry id")
		}
		return Record{Kind: kind, Head: string(m.head)}, nil
	case KindHeader:
		return Record{}, fmt.Errorf("header record after the first line")
	case KindTitle:
		title, err := decodeTitle(line)
		if err != nil {
			return Record{}, err
		}
		return Record{Kind: kind, Title: title}, nil
	default:
		return decodeBody(kind, line, a, new(bodyScratch))
	}
}

// bodyScratch holds the decoded fields of an accounting record, so that
// folding many of them allocates nothing.
type bodyScratch struct {
	usage      Usage
	uncertain  UsageUncertain
	checkpoint Checkpoint
	delegated  DelegatedUsage
	dispatch   Dispatch
	settled    DispatchSettled
	recovered  RecoveredOutput
}

// decodeBody decodes the fields of an accounting record (usage,
// usage_uncertain, checkpoint, delegated_usage). Other kinds yield a Record
// with only Kind set.
func decodeBody(kind string, line []byte, a *strAlloc, sc *bodyScratch) (Record, error) {
	r := Record{Kind: kind}
	d := decoder{b: line}
	*sc = bodyScratch{}
	switch kind {
	case KindUsage:
		r.Usage = &sc.usage
		if decodeUsageFast(line, r.Usage, a) {
			return r, nil
		}
		sc.usage = Usage{}
		d.obj(func(key []byte) { d.usageField(key, r.Usage, a) })
	case KindUsageUncertain:
		u := &sc.uncertain
		r.Uncertain = u
		d.obj(func(key []byte) {
			switch string(key) {
			case "run_id":
				u.RunID = d.str(a)
			case "operation":
				u.Operation = d.str(a)
			case "reason":
				u.Reason = d.str(a)
			case "dispatched":
				u.Dispatched = d.bool()
			case "attempt":
				u.Attempt = int(d.int())
			default:
				d.skip(0)
			}
		})
	case KindCheckpoint:
		c := &sc.checkpoint
		r.Checkpoint = c
		d.obj(func(key []byte) {
			switch string(key) {
			case "run_id":
				c.RunID = d.str(a)
			case "outcome":
				c.Outcome = d.str(a)
			case "error":
				c.Error = d.str(a)
			default:
				d.skip(0)
			}
		})
	case KindDelegatedUsage:
		dl := &sc.delegated
		r.Delegated = dl
		d.obj(func(key []byte) {
			switch string(key) {
			case "child_session":
				dl.ChildSession = d.str(a)
			case "usage":
				d.obj(func(key []byte) { d.usageField(key, &dl.Usage, a) })
			case "uncertain":
				dl.Uncertain = d.bool()
			default:
				d.skip(0)
			}
		})
	case KindDispatch, KindDispatchSettled, KindRecoveredOutput:
		d.decodeDispatchBody(kind, &r, a, sc)
	default:
		return r, nil // a newer writer's kind: kept in the file, skipped
	}
	d.end()
	if d.err != nil {
		return Record{}, d.err
	}
	return r, nil
}

// decodeUsageFast decodes a usage line of exactly the shape the encoder
// writes (members in its order, no whitespace, strings without escapes,
// non-negative integers) and reports false for anything else, which the
// general decoder then reads. For the lines it accepts it yields what the
// general decoder would.
func decodeUsageFast(line []byte, u *Usage, a *strAlloc) bool {
	f := fastDec{b: line}
	if !f.lit(`{"kind":"usage"`) {
		return false
	}
	if f.key("batch") {
		f.num()
	}
	if f.key("batch_of") {
		f.num()
	}
	if f.key("batch_index") {
		f.num()
	}
	for _, fld := range [...]struct {
		key string
		dst *string
	}{{"run_id", &u.RunID}, {"request_id", &u.RequestID}, {"operation", &u.Operation}, {"model", &u.Model}} {
		if f.key(fld.key) {
			*fld.dst = a.str(f.str())
		}
	}
	for _, fld := range [...]struct {
		key string
		dst *int64
	}{{"input", &u.Input}, {"cached_input", &u.CachedInput}, {"output", &u.Output}, {"reasoning", &u.Reasoning}, {"cost_picodollars", &u.CostPicodollars}} {
		if f.key(fld.key) {
			*fld.dst = f.num()
		}
	}
	if f.key("priced") {
		u.Priced = f.lit("true")
	}
	return f.ok && string(f.b) == "}"
}

// fastDec reads a line of a fixed shape; any surprise clears ok.
type fastDec struct {
	b  []byte
	ok bool
}

// lit consumes s, which must come next.
func (f *fastDec) lit(s string) bool {
	b, ok := bytes.CutPrefix(f.b, []byte(s))
	f.b, f.ok = b, ok
	return ok
}

// key consumes `,"k":` if it comes next.
func (f *fastDec) key(k string) bool {
	if !f.ok || len(f.b) < len(k)+4 || f.b[0] != ',' || f.b[1] != '"' ||
		string(f.b[2:2+len(k)]) != k || f.b[2+len(k)] != '"' || f.b[3+len(k)] != ':' {
		return false
	}
	f.b = f.b[len(k)+4:]
	return true
}

// str consumes a string without escapes and returns its body.
func (f *fastDec) str() []byte {
	if len(f.b) == 0 || f.b[0] != '"' {
		f.ok = false
		return nil
	}
	end := bytes.IndexByte(f.b[1:], '"')
	if end < 0 || bytes.IndexByte(f.b[1:1+end], '\\') >= 0 {
		f.ok = false
		return nil
	}
	body := f.b[1 : 1+end]
	f.b = f.b[end+2:]
	return body
}

// num consumes 1-18 decimal digits followed by ',' or '}'.
func (f *fastDec) num() int64 {
	var v int64
	n := 0
	for n < len(f.b) && n < 18 && '0' <= f.b[n] && f.b[n] <= '9' {
		v = v*10 + int64(f.b[n]-'0')
		n++
	}
	if n == 0 || n >= len(f.b) || f.b[n] != ',' && f.b[n] != '}' {
		f.ok = false
		return 0
	}
	f.b = f.b[n:]
	return v
}

func (d *decoder) usageField(key []byte, u *Usage, a *strAlloc) {
	switch string(key) {
	case "run_id":
		u.RunID = d.str(a)
	case "request_id":
		u.RequestID = d.str(a)
	case "operation":
		u.Operation = d.str(a)
	case "model":
		u.Model = d.str(a)
	case "input":
		u.Input = d.int()
	case "cached_input":
		u.CachedInput = d.int()
	case "output":
		u.Output = d.int()
	case "reasoning":
		u.Reasoning = d.int()
	case "cost_picodollars":
		u.CostPicodollars = d.int()
	case "priced":
		u.Priced = d.bool()
	default:
		d.skip(0)
	}
}

// decodeEntry decodes an entry line into a typed Entry.
func decodeEntry(line []byte, a *strAlloc) (Entry, error) {
	var e Entry
	d := decoder{b: line}
	if a != nil {
		// Reuse the unescaping buffer: every string read here is copied
		// out before the next one is decoded.
		d.scratch = a.scratch[:0]
		defer func() { a.scratch = d.scratch }()
	}
	d.obj(func(key []byte) {
		switch string(key) {
		case "id":
			e.ID = d.str(a)
		case "parent":
			e.Parent = d.str(a)
		case "time":
			e.Time = d.time()
		case "type":
			e.Type = EntryType(a.intern(d.strBytes()))
		case "run_id":
			e.RunID = a.intern(d.strBytes())
		case "text":
			e.Text = d.str(a)
		case "images":
			if imgs := d.images(a); len(imgs) > 0 {
				e.Attached = &Attached{Images: imgs}
			}
		case "items":
			items := a.items[:0]
			d.arr(func() {
				items = append(items, Item{})
				d.item(&items[len(items)-1], a)
			})
			a.items = items
			e.Items = a.itemSlice(items)
		case "stop_reason":
			e.StopReason = a.intern(d.strBytes())
		case "native_steering":
			if !d.null() {
				n := new(NativeSteering)
				d.obj(func(key []byte) {
					switch string(key) {
					case "operation":
						n.Operation = d.str(a)
					case "local_id":
						n.LocalID = d.str(a)
					default:
						d.skip(0)
					}
				})
				e.NativeSteering = n
			}
		case "result":
			if !d.null() {
				e.Result = a.result()
				d.result(e.Result, a)
			}
		case "compaction":
			if !d.null() {
				e.Compaction = new(Compaction)
				d.compaction(e.Compaction, a)
			}
		default:
			d.skip(0)
		}
	})
	d.end()
	if d.err != nil {
		return Entry{}, d.err
	}
	if e.ID == "" {
		return Entry{}, fmt.Errorf("entry without id")
	}
	if e.Type == "" {
		return Entry{}, fmt.Errorf("entry %s without type", e.ID)
	}
	return e, nil
}

func (d *decoder) item(it *Item, a *strAlloc) {
	d.obj(func(key []byte) {
		switch string(key) {
		case "type":
			it.Type = a.intern(d.strBytes())
		case "id":
			it.ID = d.str(a)
		case "text":
			it.Text = d.str(a)
		case "phase":
			it.Phase = a.intern(d.strBytes())
		case "encrypted_content":
			it.EncryptedContent = d.str(a)
		case "call_id":
			it.CallID = d.str(a)
		case "name":
			it.Name = a.intern(d.strBytes())
		case "arguments":
			it.Arguments = d.str(a)
		case "async":
			it.Async = d.bool()
		default:
			d.skip(0)
		}
	})
}

// images decodes an "images" array.
func (d *decoder) images(a *strAlloc) []Image {
	var out []Image
	d.arr(func() {
		var im Image
		d.obj(func(key []byte) {
			switch string(key) {
			case "mime_type":
				im.MimeType = a.intern(d.strBytes())
			case "sha256":
				im.SHA256 = d.str(a)
			case "bytes":
				im.Bytes = d.int()
			default:
				d.skip(0)
			}
		})
		out = append(out, im)
	})
	return out
}

func (d *decoder) result(r *ToolResult, a *strAlloc) {
	d.obj(func(key []byte) {
		switch string(key) {
		case "call_id":
			r.CallID = d.str(a)
		case "tool":
			r.Tool = a.intern(d.strBytes())
		case "text":
			r.Text = d.str(a)
		case "is_error":
			r.IsError = d.bool()
		case "images":
			if imgs := d.images(a); len(imgs) > 0 {
				r.Attached = &Attached{Images: imgs}
			}
		case "details":
			raw := d.raw()
			if d.err != nil || string(raw) == "null" {
				return
			}
			if err := json.Unmarshal(raw, &r.Details); err != nil {
				d.failSchema("invalid tool result details: " + err.Error())
			}
		default:
			d.skip(0)
		}
	})
}

func (d *decoder) compaction(c *Compaction, a *strAlloc) {
	strs := func(dst *[]string) {
		d.arr(func() { *dst = append(*dst, d.str(a)) })
	}
	d.obj(func(key []byte) {
		switch string(key) {
		case "summary":
			c.Summary = d.str(a)
		case "first_kept":
			c.FirstKept = d.str(a)
		// "skills" (an active-skill snapshot, always empty: octet has
		// no skill registry) was written by earlier versions; it is
		// skipped.
		case "readFiles":
			strs(&c.ReadFiles)
		case "modifiedFiles":
			strs(&c.ModifiedFiles)
		case "tokens_before":
			c.TokensBefore = d.int()
		case "items":
			d.arr(func() {
				c.Items = append(c.Items, Item{})
				d.item(&c.Items[len(c.Items)-1], a)
			})
		default:
			d.skip(0)
		}
	})
}
