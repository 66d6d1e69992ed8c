package store

// OpenDirLinkOnly opens a Dir whose PutIfAbsent uses the link(2) fallback,
// so tests cover the path taken on filesystems without renameat2.
func OpenDirLinkOnly(root string) (*Dir, error) {
	d, err := OpenDir(root)
	if err != nil {
		return nil, err
	}
	d.linkOnly = true
	return d, nil
}
