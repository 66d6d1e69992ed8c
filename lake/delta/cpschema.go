package delta

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// checkpointSchema is the Parquet schema checkpoints are written with:
// cpRow's fields in declaration order (Spark's), every leaf PLAIN, integers
// as bare INT32/INT64 as Spark and delta-rs write them. parquet-go's schema
// of the struct would annotate every Go integer INT(64,true) and cannot be
// told otherwise through struct tags, hence the schema is built here; the
// writer then maps cpRow's fields to it by name.
var checkpointSchema = parquet.NewSchema("spark_schema", checkpointNode(reflect.TypeFor[cpRow]()))

// checkpointNode builds the node of one cpRow field type (pointers are
// OPTIONAL; maps are string to optional string; lists hold optional strings).
func checkpointNode(t reflect.Type) parquet.Node {
	plainString := goString{parquet.Encoded(parquet.String(), &parquet.Plain)}
	switch t.Kind() {
	case reflect.Pointer:
		return parquet.Optional(checkpointNode(t.Elem()))
	case reflect.String:
		return plainString
	case reflect.Int64:
		return parquet.Encoded(parquet.Leaf(bareInt{parquet.Int64Type}), &parquet.Plain)
	case reflect.Int32:
		return parquet.Encoded(parquet.Leaf(bareInt{parquet.Int32Type}), &parquet.Plain)
	case reflect.Bool:
		return parquet.Encoded(parquet.Leaf(parquet.BooleanType), &parquet.Plain)
	case reflect.Map:
		return parquet.Optional(parquet.Map(plainString, parquet.Optional(plainString)))
	case reflect.Slice:
		return parquet.Optional(parquet.List(parquet.Optional(plainString)))
	case reflect.Struct:
		g := orderedGroup{Group: parquet.Group{}}
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("parquet"), ",")
			g.Group[name] = checkpointNode(f.Type)
			g.order = append(g.order, name)
		}
		return g
	}
	panic(fmt.Sprintf("delta: no checkpoint column type for %v", t))
}

// bareInt is an integer type without the INT(bits, signed) annotation
// parquet-go's Int32Type and Int64Type always carry: Spark and delta-rs
// write checkpoint integers bare, and readers take them as int and long.
type bareInt struct{ parquet.Type }

func (bareInt) LogicalType() *format.LogicalType { return nil }

// goString is a string leaf whose Go type is string rather than []byte, so
// the writer meets cpRow's map[string]*string as the type it expects for
// the map's key_value group (otherwise it makes a struct type with
// reflect.StructOf for every map it writes: ~15% of the checkpoint's
// write time).
type goString struct{ parquet.Node }

func (goString) GoType() reflect.Type { return reflect.TypeFor[string]() }

// orderedGroup is a parquet.Group whose fields keep the given order
// (parquet.Group sorts them by name; Spark's checkpoint order is not).
type orderedGroup struct {
	parquet.Group
	order []string
}

func (g orderedGroup) Fields() []parquet.Field {
	fields := g.Group.Fields()
	slices.SortFunc(fields, func(a, b parquet.Field) int {
		return cmp.Compare(slices.Index(g.order, a.Name()), slices.Index(g.order, b.Name()))
	})
	return fields
}
