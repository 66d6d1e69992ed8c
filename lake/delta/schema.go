package delta

import (
	"encoding/json"
	"fmt"
	"strings"
)

// StructType is a Delta schema (and the type of struct columns).
type StructType struct {
	Fields []StructField
}

// StructField is one column. Metadata holds field metadata such as
// comments; it is written as {} when empty, as Spark does.
type StructField struct {
	Name     string
	Type     DataType
	Nullable bool
	Metadata map[string]any
}

// DataType is a Spark SQL type. Primitive types have only Name ("string",
// "long", "integer", "short", "byte", "double", "float", "boolean",
// "binary", "date", "timestamp", "timestamp_ntz", "decimal(p,s)"); "struct",
// "array" and "map" use the other fields.
type DataType struct {
	Name              string
	Struct            *StructType // Name "struct"
	ElementType       *DataType   // Name "array"
	ContainsNull      bool        // Name "array"
	KeyType           *DataType   // Name "map"
	ValueType         *DataType   // Name "map"
	ValueContainsNull bool        // Name "map"
}

// Field is shorthand for a nullable primitive column.
func Field(name, typ string) StructField {
	return StructField{Name: name, Type: DataType{Name: typ}, Nullable: true}
}

// NewSchema builds a struct type of fields.
func NewSchema(fields ...StructField) *StructType { return &StructType{Fields: fields} }

// ParseSchema decodes a schemaString.
func ParseSchema(s string) (*StructType, error) {
	var st StructType
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	return &st, nil
}

// String renders the schema as a schemaString (field order name, type,
// nullable, metadata).
func (s *StructType) String() string {
	b, err := marshalNoEscape(s)
	if err != nil {
		return "" // unreachable: every value in the tree is encodable
	}
	return string(b)
}

// Field returns the column named name.
func (s *StructType) Field(name string) (StructField, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return StructField{}, false
}

// MarshalJSON implements json.Marshaler.
func (s StructType) MarshalJSON() ([]byte, error) {
	fields := s.Fields
	if fields == nil {
		fields = []StructField{}
	}
	return marshalNoEscape(struct {
		Type   string        `json:"type"`
		Fields []StructField `json:"fields"`
	}{"struct", fields})
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *StructType) UnmarshalJSON(b []byte) error {
	var w struct {
		Type   string        `json:"type"`
		Fields []StructField `json:"fields"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Type != "struct" {
		return fmt.Errorf("schema type %q, want struct", w.Type)
	}
	s.Fields = w.Fields
	return nil
}

// MarshalJSON implements json.Marshaler.
func (f StructField) MarshalJSON() ([]byte, error) {
	md := f.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return marshalNoEscape(struct {
		Name     string         `json:"name"`
		Type     DataType       `json:"type"`
		Nullable bool           `json:"nullable"`
		Metadata map[string]any `json:"metadata"`
	}{f.Name, f.Type, f.Nullable, md})
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *StructField) UnmarshalJSON(b []byte) error {
	var w struct {
		Name     *string        `json:"name"`
		Type     DataType       `json:"type"`
		Nullable bool           `json:"nullable"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Name == nil {
		return fmt.Errorf("field without name")
	}
	if w.Type.Name == "" {
		return fmt.Errorf("field %q without type", *w.Name) // Delta requires one; without it the schema could not be written back
	}
	*f = StructField{Name: *w.Name, Type: w.Type, Nullable: w.Nullable, Metadata: w.Metadata}
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d DataType) MarshalJSON() ([]byte, error) {
	switch d.Name {
	case "struct":
		if d.Struct == nil {
			return StructType{}.MarshalJSON()
		}
		return d.Struct.MarshalJSON()
	case "array":
		if d.ElementType == nil {
			return nil, fmt.Errorf("array without element type")
		}
		return marshalNoEscape(struct {
			Type         string   `json:"type"`
			ElementType  DataType `json:"elementType"`
			ContainsNull bool     `json:"containsNull"`
		}{"array", *d.ElementType, d.ContainsNull})
	case "map":
		if d.KeyType == nil || d.ValueType == nil {
			return nil, fmt.Errorf("map without key or value type")
		}
		return marshalNoEscape(struct {
			Type              string   `json:"type"`
			KeyType           DataType `json:"keyType"`
			ValueType         DataType `json:"valueType"`
			ValueContainsNull bool     `json:"valueContainsNull"`
		}{"map", *d.KeyType, *d.ValueType, d.ValueContainsNull})
	case "":
		return nil, fmt.Errorf("empty type name")
	}
	return json.Marshal(d.Name)
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *DataType) UnmarshalJSON(b []byte) error {
	*d = DataType{}
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &d.Name); err != nil {
			return err
		}
		if d.Name == "" || strings.ContainsAny(d.Name, "{}") {
			return fmt.Errorf("bad type name %q", d.Name)
		}
		return nil
	}
	var w struct {
		Type              string          `json:"type"`
		Fields            json.RawMessage `json:"fields"`
		ElementType       *DataType       `json:"elementType"`
		ContainsNull      bool            `json:"containsNull"`
		KeyType           *DataType       `json:"keyType"`
		ValueType         *DataType       `json:"valueType"`
		ValueContainsNull bool            `json:"valueContainsNull"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	d.Name = w.Type
	switch w.Type {
	case "struct":
		d.Struct = new(StructType)
		return d.Struct.UnmarshalJSON(b)
	case "array":
		if w.ElementType == nil {
			return fmt.Errorf("array without elementType")
		}
		d.ElementType, d.ContainsNull = w.ElementType, w.ContainsNull
	case "map":
		if w.KeyType == nil || w.ValueType == nil {
			return fmt.Errorf("map without keyType or valueType")
		}
		d.KeyType, d.ValueType, d.ValueContainsNull = w.KeyType, w.ValueType, w.ValueContainsNull
	default:
		return fmt.Errorf("unknown complex type %q", w.Type)
	}
	return nil
}
