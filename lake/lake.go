// Package lake holds tidemark's four Delta tables (raw_events, quarantine,
// window_results, reconcile_log) on a store.Store: their schemas, the
// Parquet files behind them, appends, the copy-on-write upsert of window
// results, scans of the raw events, compaction and vacuum. The Delta log
// itself is package delta; the bytes live behind package store.
package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"tidemark"
	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// ErrNoLake is returned by Open when the store holds no lake and the Config
// does not say how to create one (no window).
var ErrNoLake = errors.New("lake: no lake here")

// ErrConfigMismatch is returned by Open when the lake was created with other
// keys, value field or window than the Config asks for.
var ErrConfigMismatch = errors.New("lake: configuration differs from the lake's")

// Table metadata configuration keys where a lake remembers its setup.
const (
	confKeys   = "tidemark.keys"     // JSON array of key column names
	confValue  = "tidemark.value"    // value field name, "" for none
	confWindow = "tidemark.windowUs" // window size, µs
	confSlide  = "tidemark.slideUs"  // window slide, µs
	confCodec  = "tidemark.payloadCodec"
	// confKeyFields is a JSON array of the keys' field specs (see
	// tidemark.ParseField); a lake made before nested fields has only
	// confKeys, whose names are literal top-level fields.
	confKeyFields = "tidemark.keyFields"
	// confSessionGap is the session gap, µs, of a lake holding session
	// windows (`tidemark stream --session-gap`); absent on other lakes.
	confSessionGap = "tidemark.sessionGapUs"
	// confColumns is the lake's namespace (JSON object: logical name ->
	// physical name of each own column a key took the name of); absent
	// when it renames nothing.
	confColumns = "tidemark.columns"
	// confInput is how the stream reads the lake's lines (JSON Input).
	confInput = "tidemark.input"
	// confKeyTypes is a JSON array of the key columns' types (KeyType);
	// absent when every key is text (and on lakes made before typed keys).
	confKeyTypes = "tidemark.keyTypes"
	// confAggs is the lake's aggregate list (--agg), a JSON array of
	// canonical spellings (tidemark.AggList); absent when it has none.
	confAggs = "tidemark.aggs"
)

// Input is how a stream reads its lines into the lake: the input format
// and the event time's field, unit and layout. A lake remembers it as it
// remembers its keys and window, so a run that would read the same lines
// otherwise (every row quarantined, or dated 1970) is refused instead.
type Input struct {
	Format     string `json:"format"`
	TimeField  string `json:"timeField"`
	TimeUnit   string `json:"timeUnit"`
	TimeLayout string `json:"timeLayout,omitempty"`
}

// describe renders the input as flags, for error messages.
func (i Input) describe() string {
	s := fmt.Sprintf("--format %s --time-field %s --time-unit %s", i.Format, i.TimeField, i.TimeUnit)
	if i.TimeLayout != "" {
		s += fmt.Sprintf(" --time-layout %q", i.TimeLayout)
	}
	return s
}

// Config says what a lake holds. The zero Keys, ValueField and Window on an
// existing lake mean "adopt what the lake remembers".
type Config struct {
	Keys []string
	// KeyTypes are the key columns' types, in key order; nil or a
	// missing one is KeyString. Used only when Open makes the lake: an
	// existing lake keeps the types it remembers.
	KeyTypes   []KeyType
	ValueField string
	// Aggs are the --agg aggregates: window_results has a column for
	// each (and exact and agg_state), raw_events one for each input.
	// A lake remembers them; the zero list is a lake without --agg,
	// whose tables keep the columns they had before --agg.
	Aggs   tidemark.AggList
	Window tidemark.WindowSpec
	// SessionGap, when not 0, makes the lake hold session windows
	// with this gap: Open sets Window to {SessionGap, SessionGap}, and a
	// lake remembers it beside the window, so a session run on a window
	// lake, a window run on a session lake or another gap is refused.
	SessionGap time.Duration
	Logger     *slog.Logger     // nil discards
	Clock      func() time.Time // nil means time.Now
	// WriterGrace: vacuum keeps every file no version references that is
	// younger than this, and writers rewrite files older than half of it
	// instead of committing them (see checkAdds). 0 means
	// DefaultWriterGrace; every process on one lake must use the same.
	WriterGrace time.Duration
	// ShardIdle: a stream whose last commit is more than this older than
	// the newest stream's stops holding merged windows back from being
	// final (see shard.go). 0 means DefaultShardIdle.
	ShardIdle time.Duration
	// PayloadCodec compresses the payload column of the files this process
	// writes; "" takes the lake's recorded one (see payloadCodecFor).
	PayloadCodec PayloadCodec
	// Input, when set (the stream sets it; other commands leave it zero
	// and check nothing), must equal the input the lake remembers, unless
	// ChangeInput: then the lake remembers Input from now on. A lake that
	// remembers none (made before it could), or that holds no line yet,
	// takes Input.
	Input       Input
	ChangeInput bool

	// ns is the lake's namespace (see namespace), set by Open.
	ns namespace
}

// Gap returns the session gap of a session lake (SessionGap), 0 on a
// window lake.
func (c Config) Gap() time.Duration { return c.SessionGap }

// Column returns the name the lake stores one of tidemark's own columns
// under (window_results' count, raw_events' status, ...), given its
// logical name: the name itself, or _tm_<name> where a key column took it
// (see namespace). Tools that name the columns beside the keys (--print,
// the windows command) use it, so no two columns share a name.
func (c Config) Column(logical string) string { return c.ns.phys(logical) }

// KeyNames returns the key columns' names, in key order (Keys are the
// fields' specs: request.path is the column path).
func (c Config) KeyNames() []string { return keyNames(c.Keys) }

func (c Config) adopt() bool {
	return len(c.Keys) == 0 && c.ValueField == "" && c.Window.Size == 0 && c.SessionGap == 0 && c.Aggs.Empty()
}

func (c Config) slide() int64 { return c.Window.Normalized().Slide }

// describe renders the setup as flags, for error messages.
func (c Config) describe() string {
	var b strings.Builder
	for _, k := range c.Keys {
		fmt.Fprintf(&b, "--key %s ", k)
	}
	if c.ValueField != "" {
		fmt.Fprintf(&b, "--value %s ", c.ValueField)
	}
	if !c.Aggs.Empty() {
		fmt.Fprintf(&b, "%s ", c.Aggs.Describe())
	}
	if c.SessionGap > 0 {
		fmt.Fprintf(&b, "--session-gap %s", c.Gap())
		return b.String()
	}
	fmt.Fprintf(&b, "--window %s", time.Duration(c.Window.Size)*time.Microsecond)
	if c.slide() != c.Window.Size {
		fmt.Fprintf(&b, " --slide %s", time.Duration(c.slide())*time.Microsecond)
	}
	return b.String()
}

func (c Config) configuration() map[string]string {
	keys, _ := json.Marshal(c.KeyNames())
	specs, _ := json.Marshal(c.Keys)
	if c.Keys == nil {
		keys, specs = []byte("[]"), []byte("[]")
	}
	m := map[string]string{
		confKeys:      string(keys),
		confKeyFields: string(specs),
		confValue:     c.ValueField,
		confWindow:    strconv.FormatInt(c.Window.Size, 10),
		confSlide:     strconv.FormatInt(c.slide(), 10),
		confCodec:     string(c.PayloadCodec),
	}
	if c.SessionGap > 0 {
		m[confSessionGap] = strconv.FormatInt(c.SessionGap.Microseconds(), 10)
	}
	if !c.Aggs.Empty() {
		b, _ := json.Marshal(c.Aggs) // cannot fail: strings
		m[confAggs] = string(b)
	}
	if c.typed() {
		types := make([]KeyType, len(c.Keys))
		for i := range types {
			types[i] = c.KeyType(i)
		}
		b, _ := json.Marshal(types) // cannot fail: strings
		m[confKeyTypes] = string(b)
	}
	if len(c.ns) > 0 {
		b, _ := json.Marshal(c.ns) // cannot fail: strings
		m[confColumns] = string(b)
	}
	if c.Input != (Input{}) {
		b, _ := json.Marshal(c.Input) // cannot fail: strings
		m[confInput] = string(b)
	}
	return m
}

// inputFrom returns the input a table configuration remembers.
func inputFrom(m map[string]string) (Input, bool, error) {
	v, ok := m[confInput]
	if !ok {
		return Input{}, false, nil
	}
	var in Input
	if err := json.Unmarshal([]byte(v), &in); err != nil {
		return Input{}, false, fmt.Errorf("table configuration %s=%q: %w", confInput, v, err)
	}
	return in, true, nil
}

func configFrom(m map[string]string) (Config, error) {
	var c Config
	if v, ok := m[confKeyFields]; ok {
		if err := json.Unmarshal([]byte(v), &c.Keys); err != nil {
			return c, fmt.Errorf("table configuration %s=%q: %w", confKeyFields, v, err)
		}
	} else {
		// A lake made before nested fields: its keys are top-level names,
		// dots and all.
		if err := json.Unmarshal([]byte(m[confKeys]), &c.Keys); err != nil {
			return c, fmt.Errorf("table configuration %s=%q: %w", confKeys, m[confKeys], err)
		}
		for i, k := range c.Keys {
			c.Keys[i] = tidemark.FormatPath([]string{k})
		}
	}
	c.ValueField = m[confValue]
	size, err1 := strconv.ParseInt(m[confWindow], 10, 64)
	slide, err2 := strconv.ParseInt(m[confSlide], 10, 64)
	if err := errors.Join(err1, err2); err != nil || size <= 0 || slide <= 0 {
		return c, fmt.Errorf("table configuration %s=%q %s=%q: not a window", confWindow, m[confWindow], confSlide, m[confSlide])
	}
	c.Window = tidemark.WindowSpec{Size: size, Slide: slide}
	if v, ok := m[confColumns]; ok {
		if err := json.Unmarshal([]byte(v), &c.ns); err != nil {
			return c, fmt.Errorf("table configuration %s=%q: %w", confColumns, v, err)
		}
	}
	if v, ok := m[confKeyTypes]; ok {
		if err := json.Unmarshal([]byte(v), &c.KeyTypes); err != nil {
			return c, fmt.Errorf("table configuration %s=%q: %w", confKeyTypes, v, err)
		}
		for _, t := range c.KeyTypes {
			if !t.valid() {
				return c, fmt.Errorf("table configuration %s=%q: unknown key type %q", confKeyTypes, v, t)
			}
		}
	}
	if v, ok := m[confAggs]; ok {
		if err := json.Unmarshal([]byte(v), &c.Aggs); err != nil {
			return c, fmt.Errorf("table configuration %s=%q: %w", confAggs, v, err)
		}
	}
	if g, ok := m[confSessionGap]; ok {
		us, err := strconv.ParseInt(g, 10, 64)
		if err != nil || us <= 0 {
			return c, fmt.Errorf("table configuration %s=%q: not a session gap", confSessionGap, g)
		}
		c.SessionGap = time.Duration(us) * time.Microsecond
	}
	return c, nil
}

func sameSetup(a, b Config) bool {
	return slices.Equal(a.Keys, b.Keys) && a.ValueField == b.ValueField &&
		a.Window.Size == b.Window.Size && a.slide() == b.slide() && a.SessionGap == b.SessionGap &&
		a.Aggs.Equal(b.Aggs)
}

// withAggs returns c with the aggregate list aggs.
func withAggs(c Config, aggs tidemark.AggList) Config {
	c.Aggs = aggs
	return c
}

// Lake is an open lake: its four tables on one store. It is safe for
// concurrent use; each method commits through the Delta log, which resolves
// races between writers.
type Lake struct {
	st     store.Store
	cfg    Config
	log    *slog.Logger
	clock  func() time.Time
	grace  time.Duration
	tables map[string]*handle
	memo   shardMemo // see shard.go
	// input is the input the lake remembered when opened (or the one
	// this Open made it remember); zero when none.
	input Input
}

// handle pairs a table's definition with its Delta log.
type handle struct {
	def *table
	dt  *delta.Table
	// wide: the table's Delta schema is known to hold every column of def
	// (widen).
	wide atomic.Bool
}

// Open opens the lake on st, creating missing tables. An existing lake's
// remembered setup must equal cfg's (or cfg is zero and adopts it).
func Open(ctx context.Context, st store.Store, cfg Config) (*Lake, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.WriterGrace <= 0 {
		cfg.WriterGrace = DefaultWriterGrace
	}
	if cfg.SessionGap > 0 {
		cfg.Window = tidemark.WindowSpec{Size: cfg.SessionGap.Microseconds()}
	}
	// Key specs in their canonical form, so request.path and
	// path=request.path are one setup.
	if len(cfg.Keys) > 0 {
		if err := CheckKeys(cfg.Keys); err != nil {
			return nil, fmt.Errorf("open lake %s: %w", st, err)
		}
		fields, _ := tidemark.ParseKeys(cfg.Keys)
		cfg.Keys = make([]string, len(fields))
		for i, f := range fields {
			cfg.Keys[i] = f.String()
		}
	}
	l := &Lake{st: st, log: cfg.Logger, clock: cfg.Clock, grace: cfg.WriterGrace, tables: map[string]*handle{}}
	opts := delta.Options{Clock: cfg.Clock, Logger: cfg.Logger}
	logs := map[string]*delta.Table{}
	var remembered *Config
	var rememberedBy string
	var recorded map[string]string // raw_events' configuration
	var missing []string
	var unsupported error // the first table refused for its protocol
	rows := 0             // files of raw_events and quarantine: has the lake read a line?
	for _, name := range tableNames {
		dt := delta.Open(st, name, opts)
		logs[name] = dt
		snap, err := dt.Snapshot(ctx, -1)
		if errors.Is(err, delta.ErrNoTable) {
			missing = append(missing, name)
			continue
		}
		if errors.Is(err, delta.ErrUnsupported) {
			// Another engine gave this table a feature tidemark cannot
			// honour: only the commands that touch it fail (its snapshot
			// keeps returning this error); the others go on.
			cfg.Logger.Warn("table unreadable by tidemark", "table", name, "error", err)
			if unsupported == nil {
				unsupported = fmt.Errorf("open lake %s: %w", st, err)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open lake %s: %w", st, err)
		}
		got, err := configFrom(snap.Metadata.Configuration)
		if err != nil {
			return nil, fmt.Errorf("open lake %s: table %s: %w", st, name, err)
		}
		if name == TableRawEvents {
			recorded = snap.Metadata.Configuration
		}
		if name == TableRawEvents || name == TableQuarantine {
			rows += len(snap.Files)
		}
		if remembered == nil {
			remembered, rememberedBy = &got, name
		} else if !sameSetup(*remembered, got) {
			return nil, fmt.Errorf("open lake %s: %w: table %s has %s but %s has %s", st, ErrConfigMismatch, rememberedBy, remembered.describe(), name, got.describe())
		}
	}
	if remembered == nil && unsupported != nil {
		return nil, unsupported // no table tells the lake's setup
	}
	adopted := remembered != nil && cfg.adopt()
	switch {
	case adopted:
		cfg.Keys, cfg.ValueField, cfg.Window = remembered.Keys, remembered.ValueField, remembered.Window
		cfg.SessionGap, cfg.Aggs = remembered.SessionGap, remembered.Aggs
	case remembered != nil && !sameSetup(*remembered, cfg) && sameSetup(*remembered, withAggs(cfg, remembered.Aggs)):
		return nil, fmt.Errorf("open lake %s: %w: the lake keeps %s, this run asks for %s; a lake's aggregates are fixed when it is made: give the same --agg flags in the same order, or another --lake", st, ErrConfigMismatch, remembered.Aggs.Describe(), cfg.Aggs.Describe())
	case remembered != nil && !sameSetup(*remembered, cfg):
		return nil, fmt.Errorf("open lake %s: %w: the lake was created with %s, this run asks for %s; use the same flags or another --lake", st, ErrConfigMismatch, remembered.describe(), cfg.describe())
	case remembered == nil && cfg.adopt():
		return nil, fmt.Errorf("open lake %s: %w (give --window and --key to create one)", st, ErrNoLake)
	}
	cfg.Window = cfg.Window.Normalized()
	// The namespace a lake records is the one its files use; a lake made
	// before namespaces renames nothing (its keys could take no own name).
	names := cfg.KeyNames()
	cfg.ns = newNamespace(append(slices.Clone(names), inputNames(cfg.Aggs)...))
	if remembered != nil {
		// A lake keeps the key types it was made with (none: all text).
		cfg.ns, cfg.KeyTypes = remembered.ns, remembered.KeyTypes
	}
	if err := validate(cfg, adopted); err != nil {
		return nil, fmt.Errorf("open lake %s: %w", st, err)
	}
	// The input: checked before anything is written.
	var setInput bool
	if cfg.Input != (Input{}) && remembered != nil {
		had, ok, err := inputFrom(recorded)
		if err != nil {
			return nil, fmt.Errorf("open lake %s: %w", st, err)
		}
		switch {
		case !ok || cfg.ChangeInput || rows == 0:
			// A lake that has read no line yet (a first run stopped
			// before its first commit) takes the input too.
			setInput = !ok || had != cfg.Input
		case had != cfg.Input:
			return nil, fmt.Errorf("open lake %s: %w: the lake reads its lines with %s, this run asks for %s; use the same flags, or add --change-input to read them otherwise from now on", st, ErrConfigMismatch, had.describe(), cfg.Input.describe())
		}
	}
	if had, ok, err := inputFrom(recorded); err == nil && ok {
		l.input = had
	}
	if cfg.Input != (Input{}) {
		l.input = cfg.Input // made with it, taken, or equal to the one remembered
	}
	codec, err := payloadCodecFor(cfg.PayloadCodec, recorded, remembered != nil, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("open lake %s: %w", st, err)
	}
	cfg.PayloadCodec = codec
	l.cfg = cfg
	defs := map[string]*table{
		TableRawEvents:     rawEventsTable(names, cfg.KeyTypes, cfg.ValueField != "", cfg.Aggs).in(cfg.ns).withPayload(cfg.PayloadCodec),
		TableQuarantine:    quarantineTable().in(cfg.ns).withPayload(cfg.PayloadCodec),
		TableWindowResults: windowResultsTable(names, cfg.KeyTypes, cfg.Aggs).in(cfg.ns),
		TableReconcileLog:  reconcileLogTable(names, cfg.KeyTypes, cfg.SessionGap > 0).in(cfg.ns),
		// window_partials: see shard.go.
		TableWindowPartials: windowPartialsTable(names, cfg.KeyTypes, cfg.Aggs).in(cfg.ns),
	}
	for _, name := range tableNames {
		l.tables[name] = &handle{def: defs[name], dt: logs[name]}
	}
	// The missing tables are created concurrently: five independent logs,
	// whose version-0 commits and fsyncs need not wait for each other.
	errs := make([]error, len(missing))
	var created sync.WaitGroup
	for i, name := range missing {
		created.Go(func() { errs[i] = l.create(ctx, l.tables[name]) })
	}
	created.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("open lake %s: %w", st, err)
		}
	}
	if setInput {
		if err := l.rememberInput(ctx, missing); err != nil {
			return nil, fmt.Errorf("open lake %s: %w", st, err)
		}
	}
	return l, nil
}

// rememberInput records the Config's input in the configuration of every
// table (but those just created with it), raw_events last: Open reads the
// input from raw_events, so a crash half way leaves the old one in force.
func (l *Lake) rememberInput(ctx context.Context, created []string) error {
	b, _ := json.Marshal(l.cfg.Input) // cannot fail: strings
	for _, name := range slices.Backward(tableNames) {
		if slices.Contains(created, name) {
			continue
		}
		_, err := l.update(ctx, l.tables[name], func(snap *delta.Snapshot) (*delta.Transaction, []addFile, error) {
			if snap == nil || snap.Metadata.Configuration[confInput] == string(b) {
				return nil, nil, nil
			}
			md := snap.Metadata
			md.Configuration = maps.Clone(md.Configuration)
			md.Configuration[confInput] = string(b)
			return &delta.Transaction{
				Actions:             []delta.Action{{Metadata: &md}},
				Operation:           "SET TBLPROPERTIES",
				OperationParameters: map[string]string{"properties": `{"` + confInput + `":` + strconv.Quote(string(b)) + `}`},
				ReadPredicate:       func(map[string]*string) bool { return true },
			}, nil, nil
		})
		if err != nil {
			return fmt.Errorf("remember the input in %s: %w", name, err)
		}
	}
	return nil
}

// validate checks a setup before tables are made for it. Keys the lake
// already remembers (adopted) are read as they are: a lake created before
// CheckKeys existed stays readable.
func validate(cfg Config, adopted bool) error {
	if cfg.Window.Size <= 0 {
		return fmt.Errorf("window must be positive, got %d µs", cfg.Window.Size)
	}
	if adopted {
		return nil
	}
	if err := CheckKeys(cfg.Keys); err != nil {
		return err
	}
	return CheckAggs(cfg.Keys, cfg.Aggs)
}

// create writes version 0 of a table. A racing creator may win; then its
// setup must be ours.
func (l *Lake) create(ctx context.Context, h *handle) error {
	tx := &delta.Transaction{
		ReadVersion: -1,
		Operation:   "CREATE TABLE",
		Actions: []delta.Action{
			{Protocol: &delta.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}},
			{Metadata: &delta.Metadata{
				ID:               uuid.NewString(),
				Format:           delta.Format{Provider: "parquet", Options: map[string]string{}},
				SchemaString:     h.def.schemaString(),
				PartitionColumns: append([]string{}, h.def.partCols...),
				Configuration:    l.cfg.configuration(),
				CreatedTime:      l.clock().UnixMilli(),
			}},
		},
	}
	_, err := h.dt.Commit(ctx, tx)
	if err == nil {
		return nil
	}
	snap, serr := h.dt.Snapshot(ctx, -1)
	if serr != nil {
		return fmt.Errorf("create table %s: %w", h.def.name, err)
	}
	got, cerr := configFrom(snap.Metadata.Configuration)
	if cerr != nil || !sameSetup(got, l.cfg) {
		return fmt.Errorf("create table %s: %w: created concurrently with %s", h.def.name, ErrConfigMismatch, got.describe())
	}
	return nil
}

// Config returns the lake's setup (as remembered, when Open adopted it),
// with Window.Slide always set (Size for tumbling windows).
func (l *Lake) Config() Config { return l.cfg }

// Input returns how the lake's lines are read, as it remembers it (the
// format and the event time's field, unit and layout); ok is false when
// it remembers none (a lake made before inputs were remembered, or one no
// stream has written to yet).
func (l *Lake) Input() (in Input, ok bool) { return l.input, l.input != (Input{}) }

// Store returns the store the lake lives in.
func (l *Lake) Store() store.Store { return l.st }

// phys returns the physical name of one of tidemark's own columns (or
// partition columns) in this lake, given its logical name.
func (l *Lake) phys(logical string) string { return l.cfg.ns.phys(logical) }
