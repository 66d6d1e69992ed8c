package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/parquet-go/parquet-go"

	"tidemark"
	"tidemark/lake/store"
)

// The checkpoint row types are Spark's checkpoint schema (Delta 2.4-3.x,
// as in the spark-*-checkpoint golden tables): the same columns, in the same
// order, with the same types and repetitions, including the ones tidemark
// never fills (deletion vectors, row tracking, domainMetadata), so readers
// that bind the schema Spark writes find every column they look for.
// Columns are matched by name on read, so delta-rs's column order (and
// files missing some columns) read the same; every field is optional.
//
// They are written with checkpointSchema (cpschema.go), not the schema
// parquet-go derives from the struct: every leaf PLAIN, never parquet-go's
// DELTA_LENGTH_BYTE_ARRAY default for strings, which readers that implement
// what Spark and delta-rs write cannot decode.
type cpRow struct {
	Txn            *cpTxn            `parquet:"txn,optional"`
	Add            *cpAdd            `parquet:"add,optional"`
	Remove         *cpRemove         `parquet:"remove,optional"`
	MetaData       *cpMetadata       `parquet:"metaData,optional"`
	Protocol       *cpProtocol       `parquet:"protocol,optional"`
	DomainMetadata *cpDomainMetadata `parquet:"domainMetadata,optional"`
}

type cpTxn struct {
	AppID       *string `parquet:"appId,optional"`
	Version     *int64  `parquet:"version,optional"`
	LastUpdated *int64  `parquet:"lastUpdated,optional"`
}

type cpAdd struct {
	Path                    *string            `parquet:"path,optional"`
	PartitionValues         map[string]*string `parquet:"partitionValues,optional"`
	Size                    *int64             `parquet:"size,optional"`
	ModificationTime        *int64             `parquet:"modificationTime,optional"`
	DataChange              *bool              `parquet:"dataChange,optional"`
	Tags                    map[string]*string `parquet:"tags,optional"`
	DeletionVector          *cpDV              `parquet:"deletionVector,optional"`
	BaseRowID               *int64             `parquet:"baseRowId,optional"`
	DefaultRowCommitVersion *int64             `parquet:"defaultRowCommitVersion,optional"`
	Stats                   *string            `parquet:"stats,optional"`
}

type cpDV struct {
	StorageType    *string `parquet:"storageType,optional"`
	PathOrInlineDv *string `parquet:"pathOrInlineDv,optional"`
	Offset         *int32  `parquet:"offset,optional"`
	SizeInBytes    *int32  `parquet:"sizeInBytes,optional"`
	Cardinality    *int64  `parquet:"cardinality,optional"`
	MaxRowIndex    *int64  `parquet:"maxRowIndex,optional"`
}

type cpRemove struct {
	Path                    *string            `parquet:"path,optional"`
	DeletionTimestamp       *int64             `parquet:"deletionTimestamp,optional"`
	DataChange              *bool              `parquet:"dataChange,optional"`
	ExtendedFileMetadata    *bool              `parquet:"extendedFileMetadata,optional"`
	PartitionValues         map[string]*string `parquet:"partitionValues,optional"`
	Size                    *int64             `parquet:"size,optional"`
	DeletionVector          *cpDV              `parquet:"deletionVector,optional"`
	BaseRowID               *int64             `parquet:"baseRowId,optional"`
	DefaultRowCommitVersion *int64             `parquet:"defaultRowCommitVersion,optional"`
}

type cpFormat struct {
	Provider *string            `parquet:"provider,optional"`
	Options  map[string]*string `parquet:"options,optional"`
}

type cpMetadata struct {
	ID               *string            `parquet:"id,optional"`
	Name             *string            `parquet:"name,optional"`
	Description      *string            `parquet:"description,optional"`
	Format           *cpFormat          `parquet:"format,optional"`
	SchemaString     *string            `parquet:"schemaString,optional"`
	PartitionColumns []*string          `parquet:"partitionColumns,optional,list"`
	Configuration    map[string]*string `parquet:"configuration,optional"`
	CreatedTime      *int64             `parquet:"createdTime,optional"`
}

type cpProtocol struct {
	MinReaderVersion *int32    `parquet:"minReaderVersion,optional"`
	MinWriterVersion *int32    `parquet:"minWriterVersion,optional"`
	ReaderFeatures   []*string `parquet:"readerFeatures,optional,list"`
	WriterFeatures   []*string `parquet:"writerFeatures,optional,list"`
}

type cpDomainMetadata struct {
	Domain        *string `parquet:"domain,optional"`
	Configuration *string `parquet:"configuration,optional"`
	Removed       *bool   `parquet:"removed,optional"`
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

func strMap(m map[string]*string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = deref(v)
	}
	return out
}

func ptrMap(m map[string]string) map[string]*string {
	out := make(map[string]*string, len(m))
	for k, v := range m {
		out[k] = ptr(v)
	}
	return out
}

func strList(l []*string) []string {
	if l == nil {
		return nil
	}
	out := make([]string, 0, len(l))
	for _, s := range l {
		out = append(out, deref(s))
	}
	return out
}

func ptrList(l []string) []*string {
	out := make([]*string, 0, len(l))
	for _, s := range l {
		out = append(out, ptr(s))
	}
	return out
}

// action converts one checkpoint row into the action it holds (false if the
// row holds none this package reads, such as domainMetadata).
func (r *cpRow) action() (Action, bool, error) {
	switch {
	case r.Add != nil && r.Add.Path != nil:
		if r.Add.DeletionVector != nil && r.Add.DeletionVector.StorageType != nil {
			return Action{}, false, fmt.Errorf("%w: deletionVectors (add %s)", ErrUnsupported, *r.Add.Path)
		}
		return Action{Add: &Add{Path: *r.Add.Path, PartitionValues: r.Add.PartitionValues, Size: deref(r.Add.Size),
			ModificationTime: deref(r.Add.ModificationTime), DataChange: deref(r.Add.DataChange),
			Stats: deref(r.Add.Stats), Tags: strMap(r.Add.Tags)}}, true, nil
	case r.Remove != nil && r.Remove.Path != nil:
		return Action{Remove: &Remove{Path: *r.Remove.Path, DeletionTimestamp: deref(r.Remove.DeletionTimestamp),
			DataChange: deref(r.Remove.DataChange), ExtendedFileMetadata: deref(r.Remove.ExtendedFileMetadata),
			PartitionValues: r.Remove.PartitionValues, Size: deref(r.Remove.Size)}}, true, nil
	case r.Txn != nil && r.Txn.AppID != nil:
		return Action{Txn: &Txn{AppID: *r.Txn.AppID, Version: deref(r.Txn.Version), LastUpdated: deref(r.Txn.LastUpdated)}}, true, nil
	case r.MetaData != nil && r.MetaData.ID != nil:
		m := r.MetaData
		md := &Metadata{ID: *m.ID, Name: deref(m.Name), Description: deref(m.Description), SchemaString: deref(m.SchemaString),
			PartitionColumns: strList(m.PartitionColumns), Configuration: strMap(m.Configuration), CreatedTime: deref(m.CreatedTime)}
		if m.Format != nil {
			md.Format = Format{Provider: deref(m.Format.Provider), Options: strMap(m.Format.Options)}
		}
		return Action{Metadata: md}, true, nil
	case r.Protocol != nil && r.Protocol.MinReaderVersion != nil:
		p := r.Protocol
		return Action{Protocol: &Protocol{MinReaderVersion: int(*p.MinReaderVersion), MinWriterVersion: int(deref(p.MinWriterVersion)),
			ReaderFeatures: strList(p.ReaderFeatures), WriterFeatures: strList(p.WriterFeatures)}}, true, nil
	}
	return Action{}, false, nil
}

// rowOf converts an action into a checkpoint row.
func rowOf(a Action) cpRow {
	switch {
	case a.Add != nil:
		d := a.Add
		r := &cpAdd{Path: ptr(d.Path), PartitionValues: nonNilPV(d.PartitionValues), Size: ptr(d.Size),
			ModificationTime: ptr(d.ModificationTime), DataChange: ptr(d.DataChange)}
		if d.Stats != "" {
			r.Stats = ptr(d.Stats)
		}
		if d.Tags != nil {
			r.Tags = ptrMap(d.Tags)
		}
		return cpRow{Add: r}
	case a.Remove != nil:
		d := a.Remove
		return cpRow{Remove: &cpRemove{Path: ptr(d.Path), DeletionTimestamp: ptr(d.DeletionTimestamp), DataChange: ptr(d.DataChange),
			ExtendedFileMetadata: ptr(d.ExtendedFileMetadata), PartitionValues: nonNilPV(d.PartitionValues), Size: ptr(d.Size)}}
	case a.Txn != nil:
		return cpRow{Txn: &cpTxn{AppID: ptr(a.Txn.AppID), Version: ptr(a.Txn.Version), LastUpdated: ptr(a.Txn.LastUpdated)}}
	case a.Metadata != nil:
		m := a.Metadata
		r := &cpMetadata{ID: ptr(m.ID), SchemaString: ptr(m.SchemaString), PartitionColumns: ptrList(m.PartitionColumns),
			Configuration: ptrMap(m.Configuration), CreatedTime: ptr(m.CreatedTime),
			Format: &cpFormat{Provider: ptr(m.Format.Provider), Options: ptrMap(m.Format.Options)}}
		if m.Name != "" {
			r.Name = ptr(m.Name)
		}
		if m.Description != "" {
			r.Description = ptr(m.Description)
		}
		return cpRow{MetaData: r}
	case a.Protocol != nil:
		p := a.Protocol
		r := &cpProtocol{MinReaderVersion: ptr(int32(p.MinReaderVersion)), MinWriterVersion: ptr(int32(p.MinWriterVersion))}
		if p.ReaderFeatures != nil {
			r.ReaderFeatures = ptrList(p.ReaderFeatures)
		}
		if p.WriterFeatures != nil {
			r.WriterFeatures = ptrList(p.WriterFeatures)
		}
		return cpRow{Protocol: r}
	}
	return cpRow{}
}

// readCheckpoint loads the state stored in a checkpoint's parts.
func (t *Table) readCheckpoint(ctx context.Context, version int64, keys []string) (*state, error) {
	s := newState()
	for _, key := range keys {
		actions, err := readCheckpointFile(ctx, t.st, key)
		if err != nil {
			return nil, fmt.Errorf("read checkpoint %s: %w", key, err)
		}
		for _, a := range actions {
			s.apply(a)
		}
	}
	s.version, s.cpVersion = version, version
	if s.protocol == nil || s.metadata == nil {
		return nil, fmt.Errorf("read checkpoint %d: no protocol or metaData", version)
	}
	return s, nil
}

// readCheckpointFile reads the actions of one checkpoint part. parquet-go
// can panic on malformed files, so a panic becomes an error here.
func readCheckpointFile(ctx context.Context, st store.Store, key string) (actions []Action, err error) {
	r, err := st.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	defer func() {
		if p := recover(); p != nil {
			actions, err = nil, fmt.Errorf("corrupt parquet: %v", p)
		}
	}()
	if err := CheckParquetTrailer(r, r.Size()); err != nil {
		return nil, fmt.Errorf("corrupt parquet: %w", err)
	}
	f, err := parquet.OpenFile(r, r.Size())
	if err != nil {
		return nil, err
	}
	rd := parquet.NewGenericReader[cpRow](f)
	defer rd.Close()
	buf := make([]cpRow, 256)
	for {
		n, rerr := rd.Read(buf)
		for i := range buf[:n] {
			a, ok, err := buf[i].action()
			if err != nil {
				return nil, err
			}
			if ok {
				actions = append(actions, a)
			}
			buf[i] = cpRow{}
		}
		if errors.Is(rerr, io.EOF) {
			return actions, nil
		}
		if rerr != nil {
			return nil, rerr
		}
	}
}

// checkpointWriterOptions are the Parquet settings of a checkpoint, each
// set as Spark writes its checkpoints rather than left to parquet-go:
// SNAPPY, data page v1, PLAIN values (also as the default of every
// physical type, should a leaf lack its own) with RLE levels, and a
// created_by parquet-mr parses.
func checkpointWriterOptions() []parquet.WriterOption {
	opts := []parquet.WriterOption{
		checkpointSchema,
		parquet.Compression(&parquet.Snappy),
		parquet.DataPageVersion(1),
		&parquet.WriterConfig{CreatedBy: tidemark.CreatedBy()},
	}
	for _, k := range []parquet.Kind{parquet.Boolean, parquet.Int32, parquet.Int64, parquet.Float, parquet.Double, parquet.ByteArray} {
		opts = append(opts, parquet.DefaultEncodingFor(k, &parquet.Plain))
	}
	return opts
}

// writeCheckpoint writes a classic single-file checkpoint of s and then
// _last_checkpoint. The checkpoint holds protocol, metaData, every txn,
// every active add and every tombstone not yet expired (see Retention),
// one per row.
func (t *Table) writeCheckpoint(ctx context.Context, s *state) (err error) {
	snap := s.snapshot()
	if ret, err := RetentionOf(snap.Metadata.Configuration); err != nil {
		t.opts.Logger.Warn("delta tombstones kept", "table", t.path, "error", err)
	} else {
		snap.Tombstones = liveTombstones(snap.Tombstones, t.opts.Clock().Add(-ret.DeletedFiles).UnixMilli())
	}
	rows := make([]cpRow, 0, 2+len(snap.Txns)+len(snap.Files)+len(snap.Tombstones))
	rows = append(rows, rowOf(Action{Protocol: &snap.Protocol}), rowOf(Action{Metadata: &snap.Metadata}))
	for _, app := range slices.Sorted(maps.Keys(snap.Txns)) {
		txn := snap.Txns[app]
		rows = append(rows, rowOf(Action{Txn: &txn}))
	}
	for i := range snap.Files {
		rows = append(rows, rowOf(Action{Add: &snap.Files[i]}))
	}
	for i := range snap.Tombstones {
		rows = append(rows, rowOf(Action{Remove: &snap.Tombstones[i]}))
	}
	var buf bytes.Buffer
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("parquet writer panic: %v", p)
			}
		}()
		w := parquet.NewGenericWriter[cpRow](&buf, checkpointWriterOptions()...)
		if _, err = w.Write(rows); err != nil {
			return
		}
		err = w.Close()
	}()
	if err != nil {
		return fmt.Errorf("write checkpoint %d: %w", s.version, err)
	}
	size := int64(buf.Len())
	key := t.logKey(fmt.Sprintf("%020d.checkpoint.parquet", s.version))
	if err := t.st.Put(ctx, key, &buf, size); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	lc, err := json.Marshal(lastCheckpoint{Version: s.version, Size: int64(len(rows)), SizeInBytes: size, NumOfAddFiles: int64(len(snap.Files))})
	if err != nil {
		return fmt.Errorf("write _last_checkpoint: %w", err)
	}
	if err := t.st.Put(ctx, t.logKey("_last_checkpoint"), bytes.NewReader(lc), int64(len(lc))); err != nil {
		return fmt.Errorf("write _last_checkpoint: %w", err)
	}
	return nil
}
