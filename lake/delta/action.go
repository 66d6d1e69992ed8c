package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// Protocol is the protocol action: the reader and writer versions (and, for
// reader 3 / writer 7, the named features) a client needs.
type Protocol struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Format names the data files' format; Provider is "parquet".
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Metadata is the metaData action: the table's id, schema, partitioning and
// configuration.
type Metadata struct {
	ID               string
	Name             string // "" is written as absent
	Description      string // "" is written as absent
	Format           Format
	SchemaString     string // a JSON StructType document
	PartitionColumns []string
	Configuration    map[string]string
	CreatedTime      int64 // epoch ms; 0 is written as absent
}

// Add is the add action: a data file that becomes part of the table.
type Add struct {
	Path             string             // relative to the table, URI-encoded
	PartitionValues  map[string]*string // every partition column; nil value = null
	Size             int64              // bytes
	ModificationTime int64              // epoch ms
	DataChange       bool
	Stats            string // JSON statistics document, "" = none
	Tags             map[string]string
}

// Remove is the remove action: a data file that leaves the table (a
// tombstone, kept until vacuum).
type Remove struct {
	Path                 string
	DeletionTimestamp    int64 // epoch ms
	DataChange           bool
	ExtendedFileMetadata bool
	PartitionValues      map[string]*string
	Size                 int64
	Stats                string
}

// Txn is the txn (SetTransaction) action: the latest version an application
// committed, used for idempotent writes.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated int64  `json:"lastUpdated,omitempty"`
}

// CommitInfo is the commitInfo action: provenance of one commit, the fields
// Spark writes in the order it writes them. Fields other engines add are
// kept in Extra on read (and not written back).
type CommitInfo struct {
	Timestamp           int64
	Operation           string
	OperationParameters map[string]string
	ReadVersion         *int64 // absent on the first commit
	IsolationLevel      string
	IsBlindAppend       *bool
	OperationMetrics    map[string]string // values are strings, as Spark writes them
	EngineInfo          string
	TxnID               string
	Extra               map[string]json.RawMessage
}

// Action is one line of a commit file: exactly one field is set (Unknown
// holds actions this package does not interpret, such as cdc or
// domainMetadata, kept so checks can see them).
type Action struct {
	CommitInfo *CommitInfo
	Protocol   *Protocol
	Metadata   *Metadata
	Txn        *Txn
	Add        *Add
	Remove     *Remove
	Unknown    map[string]json.RawMessage
}

// Key returns the store key of the file: the table path joined with the
// action's path, URI-decoded exactly once. Absolute URIs are returned as
// found (decoded), which callers reject as outside the table.
func (a Add) Key(tablePath string) string { return fileKey(tablePath, a.Path) }

// Key returns the store key of the removed file (see Add.Key).
func (r Remove) Key(tablePath string) string { return fileKey(tablePath, r.Path) }

func fileKey(tablePath, p string) string {
	dec, err := url.PathUnescape(p)
	if err != nil {
		dec = p
	}
	if tablePath == "" {
		return dec
	}
	return path.Join(tablePath, dec)
}

// EncodePath turns a relative file path (slash-separated, as on disk) into
// the URI-encoded form Spark writes in add and remove actions.
func EncodePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// wire types fix the JSON field order to Spark's.
type wireMetadata struct {
	ID               string            `json:"id"`
	Name             *string           `json:"name,omitempty"`
	Description      *string           `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
}

type wireAdd struct {
	Path             string             `json:"path"`
	PartitionValues  map[string]*string `json:"partitionValues"`
	Size             int64              `json:"size"`
	ModificationTime int64              `json:"modificationTime"`
	DataChange       bool               `json:"dataChange"`
	Stats            *string            `json:"stats,omitempty"`
	Tags             map[string]string  `json:"tags,omitempty"`
	DeletionVector   json.RawMessage    `json:"deletionVector,omitempty"`
}

type wireRemove struct {
	Path                 string              `json:"path"`
	DeletionTimestamp    *int64              `json:"deletionTimestamp,omitempty"`
	DataChange           bool                `json:"dataChange"`
	ExtendedFileMetadata *bool               `json:"extendedFileMetadata,omitempty"`
	PartitionValues      *map[string]*string `json:"partitionValues,omitempty"`
	Size                 *int64              `json:"size,omitempty"`
	Stats                *string             `json:"stats,omitempty"`
	DeletionVector       json.RawMessage     `json:"deletionVector,omitempty"`
}

type wireCommitInfo struct {
	Timestamp           int64             `json:"timestamp"`
	Operation           string            `json:"operation,omitempty"`
	OperationParameters map[string]string `json:"operationParameters,omitempty"`
	ReadVersion         *int64            `json:"readVersion,omitempty"`
	IsolationLevel      string            `json:"isolationLevel,omitempty"`
	IsBlindAppend       *bool             `json:"isBlindAppend,omitempty"`
	OperationMetrics    map[string]string `json:"operationMetrics,omitempty"`
	EngineInfo          string            `json:"engineInfo,omitempty"`
	TxnID               string            `json:"txnId,omitempty"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNilPV(m map[string]*string) map[string]*string {
	if m == nil {
		return map[string]*string{}
	}
	return m
}

// MarshalJSON encodes the action as one JSON object in Spark's field order,
// without a trailing newline.
func (a Action) MarshalJSON() ([]byte, error) {
	var key string
	var v any
	switch {
	case a.CommitInfo != nil:
		c := a.CommitInfo
		key, v = "commitInfo", wireCommitInfo{c.Timestamp, c.Operation, c.OperationParameters, c.ReadVersion,
			c.IsolationLevel, c.IsBlindAppend, c.OperationMetrics, c.EngineInfo, c.TxnID}
	case a.Protocol != nil:
		key, v = "protocol", a.Protocol
	case a.Metadata != nil:
		m := a.Metadata
		w := wireMetadata{ID: m.ID, Name: strPtr(m.Name), Description: strPtr(m.Description), Format: m.Format,
			SchemaString: m.SchemaString, PartitionColumns: m.PartitionColumns, Configuration: m.Configuration}
		if w.Format.Options == nil {
			w.Format.Options = map[string]string{}
		}
		if w.PartitionColumns == nil {
			w.PartitionColumns = []string{}
		}
		if w.Configuration == nil {
			w.Configuration = map[string]string{}
		}
		if m.CreatedTime != 0 {
			w.CreatedTime = &m.CreatedTime
		}
		key, v = "metaData", w
	case a.Txn != nil:
		key, v = "txn", a.Txn
	case a.Add != nil:
		d := a.Add
		key, v = "add", wireAdd{Path: d.Path, PartitionValues: nonNilPV(d.PartitionValues), Size: d.Size,
			ModificationTime: d.ModificationTime, DataChange: d.DataChange, Stats: strPtr(d.Stats), Tags: d.Tags}
	case a.Remove != nil:
		r := a.Remove
		w := wireRemove{Path: r.Path, DeletionTimestamp: &r.DeletionTimestamp, DataChange: r.DataChange, Stats: strPtr(r.Stats)}
		if r.ExtendedFileMetadata {
			t := true
			w.ExtendedFileMetadata = &t
			pv := nonNilPV(r.PartitionValues)
			w.PartitionValues = &pv
			w.Size = &r.Size
		}
		key, v = "remove", w
	case len(a.Unknown) == 1:
		return json.Marshal(a.Unknown)
	default:
		return nil, fmt.Errorf("delta: marshal empty action")
	}
	body, err := marshalNoEscape(v)
	if err != nil {
		return nil, fmt.Errorf("marshal %s action: %w", key, err)
	}
	out := make([]byte, 0, len(body)+len(key)+5)
	out = append(out, '{', '"')
	out = append(out, key...)
	out = append(out, '"', ':')
	out = append(out, body...)
	return append(out, '}'), nil
}

// marshalNoEscape is json.Marshal without HTML escaping (Spark writes '<'
// and '&' as they are) and without the trailing newline.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// EncodeActions renders a commit file: one action per line, each line
// ending in a newline.
func EncodeActions(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	for i, a := range actions {
		b, err := a.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("encode action %d: %w", i, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// UnmarshalJSON decodes one action line. It accepts what Spark and delta-rs
// write: any field order, explicit nulls for optional fields, and numbers
// where Spark writes strings in commitInfo maps.
func (a *Action) UnmarshalJSON(data []byte) error {
	*a = Action{}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return err
	}
	if top == nil {
		return fmt.Errorf("action is null")
	}
	n := 0
	for k, raw := range top {
		if isNull(raw) {
			continue
		}
		n++
		var err error
		switch k {
		case "commitInfo":
			a.CommitInfo, err = decodeCommitInfo(raw)
		case "protocol":
			a.Protocol = new(Protocol)
			err = json.Unmarshal(raw, a.Protocol)
		case "metaData":
			a.Metadata, err = decodeMetadata(raw)
		case "txn":
			a.Txn = new(Txn)
			err = json.Unmarshal(raw, a.Txn)
			if err == nil && a.Txn.AppID == "" {
				err = fmt.Errorf("txn without appId")
			}
		case "add":
			a.Add, err = decodeAdd(raw)
		case "remove":
			a.Remove, err = decodeRemove(raw)
		default:
			if a.Unknown == nil {
				a.Unknown = map[string]json.RawMessage{}
			}
			a.Unknown[k] = raw
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	if n != 1 {
		return fmt.Errorf("want exactly one action per line, got %d", n)
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func decodeMetadata(raw json.RawMessage) (*Metadata, error) {
	var w wireMetadata
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	m := &Metadata{ID: w.ID, Format: w.Format, SchemaString: w.SchemaString,
		PartitionColumns: w.PartitionColumns, Configuration: w.Configuration}
	if w.Name != nil {
		m.Name = *w.Name
	}
	if w.Description != nil {
		m.Description = *w.Description
	}
	if w.CreatedTime != nil {
		m.CreatedTime = *w.CreatedTime
	}
	return m, nil
}

func decodeAdd(raw json.RawMessage) (*Add, error) {
	var w wireAdd
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	if w.Path == "" {
		return nil, fmt.Errorf("add without path")
	}
	if !isNull(w.DeletionVector) {
		return nil, fmt.Errorf("%w: deletionVectors (add %s)", ErrUnsupported, w.Path)
	}
	a := &Add{Path: w.Path, PartitionValues: w.PartitionValues, Size: w.Size,
		ModificationTime: w.ModificationTime, DataChange: w.DataChange, Tags: w.Tags}
	if w.Stats != nil {
		a.Stats = *w.Stats
	}
	return a, nil
}

func decodeRemove(raw json.RawMessage) (*Remove, error) {
	var w wireRemove
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, err
	}
	if w.Path == "" {
		return nil, fmt.Errorf("remove without path")
	}
	if !isNull(w.DeletionVector) {
		return nil, fmt.Errorf("%w: deletionVectors (remove %s)", ErrUnsupported, w.Path)
	}
	r := &Remove{Path: w.Path, DataChange: w.DataChange}
	if w.PartitionValues != nil {
		r.PartitionValues = *w.PartitionValues
	}
	if w.DeletionTimestamp != nil {
		r.DeletionTimestamp = *w.DeletionTimestamp
	}
	if w.ExtendedFileMetadata != nil {
		r.ExtendedFileMetadata = *w.ExtendedFileMetadata
	}
	if w.Size != nil {
		r.Size = *w.Size
	}
	if w.Stats != nil {
		r.Stats = *w.Stats
	}
	return r, nil
}

func decodeCommitInfo(raw json.RawMessage) (*CommitInfo, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	c := &CommitInfo{}
	for k, v := range top {
		if isNull(v) {
			continue
		}
		var err error
		switch k {
		case "timestamp":
			err = json.Unmarshal(v, &c.Timestamp)
		case "operation":
			err = json.Unmarshal(v, &c.Operation)
		case "operationParameters":
			c.OperationParameters, err = stringMap(v)
		case "operationMetrics":
			c.OperationMetrics, err = stringMap(v)
		case "readVersion":
			var n int64
			err = json.Unmarshal(v, &n)
			c.ReadVersion = &n
		case "isolationLevel":
			err = json.Unmarshal(v, &c.IsolationLevel)
		case "isBlindAppend":
			var b bool
			err = json.Unmarshal(v, &b)
			c.IsBlindAppend = &b
		case "engineInfo":
			err = json.Unmarshal(v, &c.EngineInfo)
		case "txnId":
			err = json.Unmarshal(v, &c.TxnID)
		default:
			if c.Extra == nil {
				c.Extra = map[string]json.RawMessage{}
			}
			c.Extra[k] = v
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	return c, nil
}

// stringMap decodes an object whose values may be strings, numbers, bools or
// nested JSON (delta-rs writes numbers and arrays); non-strings keep their
// JSON text.
func stringMap(raw json.RawMessage) (map[string]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		var s string
		if len(v) > 0 && v[0] == '"' {
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, err
			}
		} else {
			s = string(v)
		}
		out[k] = s
	}
	return out, nil
}

// DecodeActions parses a commit file (newline-separated JSON actions; the
// last newline is optional, blank lines are skipped). name is used in
// errors.
func DecodeActions(name string, data []byte) ([]Action, error) {
	var out []Action
	line := 0
	for len(data) > 0 {
		line++
		i := bytes.IndexByte(data, '\n')
		var l []byte
		if i < 0 {
			l, data = data, nil
		} else {
			l, data = data[:i], data[i+1:]
		}
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		var a Action
		if err := a.UnmarshalJSON(l); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, line, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// parseVersion parses a 20-digit (or shorter) decimal version prefix.
func parseVersion(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}
