package lateness

import (
	"fmt"
	"strings"

	"tidemark"
	"tidemark/lake"
)

// allGroup names the one group of --by none.
const allGroup = "all"

// nullGroup names the group of rows without the --by key field, as
// tidemark.Key.String renders null.
const nullGroup = "∅"

// grouper assigns rows to groups.
type grouper struct {
	by      string
	source  bool // one group per source (tidemark's own column)
	keyPart int  // index of the --by key among the lake's keys; -1 otherwise
	max     int
	names   []string             // group names by index
	ids     map[string]int       // group name -> index into names
	byKey   map[tidemark.Key]int // cache for key grouping
}

// newGrouper resolves by against the lake's raw_events columns: a key
// column by its name (or by ByKeyPrefix and its name, which is never
// anything else), tidemark's source column by the name the lake
// stores it under (lake.Config.Column: "source", or "_tm_source" in a lake
// where a key is named source, so that there "source" is the key, as in
// SQL over the table).
func newGrouper(lc lake.Config, by string, maxGroups int) (*grouper, error) {
	g := &grouper{by: by, keyPart: -1, max: maxGroups, ids: map[string]int{}, byKey: map[tidemark.Key]int{}}
	keys := lc.KeyNames()
	own := lc.Column(lake.ColSource)
	if by == ByNone {
		return g, nil
	}
	name, explicit := strings.CutPrefix(by, ByKeyPrefix)
	for i, k := range keys {
		if k == name {
			g.keyPart = i
			return g, nil
		}
	}
	if explicit {
		return nil, fmt.Errorf("lateness: --by %s: the lake has no key field %s (its keys: %s)", by, name, strings.Join(keys, ", "))
	}
	if by == own {
		g.source = true
		return g, nil
	}
	hint := ""
	if own != BySource {
		hint = fmt.Sprintf(" (in this lake a key is named %s, so tidemark's source column is %s)", BySource, own)
	}
	return nil, fmt.Errorf("lateness: --by %s: want none, %s or a key field of the lake (%s)%s", by, own, strings.Join(keys, ", "), hint)
}

// id returns the index of the named group, creating it.
func (g *grouper) id(name string) (int, error) {
	if i, ok := g.ids[name]; ok {
		return i, nil
	}
	if len(g.names) >= g.max {
		return 0, fmt.Errorf("lateness: --by %s: more than %d groups", g.by, g.max)
	}
	g.ids[name] = len(g.names)
	g.names = append(g.names, name)
	return len(g.names) - 1, nil
}

// group returns the group of row i of b.
func (g *grouper) group(b lake.RawBatch, i int) (int, error) {
	switch {
	case g.by == ByNone:
		if len(g.names) == 1 {
			return 0, nil
		}
		return g.id(allGroup)
	case g.source:
		return g.id(b.Source[i])
	}
	k := b.Key[i]
	if id, ok := g.byKey[k]; ok {
		return id, nil
	}
	name := nullGroup
	if parts := k.Parts(); g.keyPart < len(parts) && !parts[g.keyPart].Null {
		name = parts[g.keyPart].Value
	}
	id, err := g.id(name)
	if err != nil {
		return 0, err
	}
	if len(g.byKey) < 1<<16 { // bound the cache when other key parts vary
		g.byKey[k] = id
	}
	return id, nil
}
