package delta

import (
	"fmt"
	"strings"
)

// NullPartition is the directory value Spark and Hive use for a null (or
// empty) partition value.
const NullPartition = "__HIVE_DEFAULT_PARTITION__"

// escapePartitionChar reports whether Hive/Spark escape c in a partition
// directory name (ExternalCatalogUtils.charToEscape).
func escapePartitionChar(c byte) bool {
	return c < 0x20 || c == 0x7f || strings.IndexByte("\"#%'*/:=?\\{[]^", c) >= 0
}

// EscapePartitionValue renders a partition value as Spark names directories:
// special characters as %XX (":" becomes "%3A"), null or "" as
// NullPartition.
func EscapePartitionValue(v *string) string {
	if v == nil || *v == "" {
		return NullPartition
	}
	var b strings.Builder
	for i := 0; i < len(*v); i++ {
		c := (*v)[i]
		if escapePartitionChar(c) {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// PartitionDir returns the on-disk directory of a partition, relative to
// the table ("c1=4/c2=c"), in column order; "" when cols is empty. Pass
// EncodePath(PartitionDir(...) + "/" + file) as the add action's path.
func PartitionDir(cols []string, values map[string]*string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		name := c
		if EscapePartitionValue(&name) != name {
			name = EscapePartitionValue(&name)
		}
		parts[i] = name + "=" + EscapePartitionValue(values[c])
	}
	return strings.Join(parts, "/")
}
