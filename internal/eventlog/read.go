package eventlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Tail reads the lines appended to an events file since its previous call. It keeps
// a partial last line (a writer mid-write) for the next call.
type Tail struct {
	path    string
	offset  int64
	partial []byte
}

// NewTail starts reading path from its beginning. The file need not exist yet.
func NewTail(path string) *Tail { return &Tail{path: path} }

// Next returns the complete records appended since the last call.
func (t *Tail) Next() ([]Record, error) {
	f, err := os.Open(t.path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(t.offset, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	t.offset += int64(len(b))
	b = append(t.partial, b...)
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		t.partial = b
		return nil, nil
	}
	t.partial = append([]byte(nil), b[end+1:]...)
	var out []Record
	for i, ln := range bytes.Split(b[:end], []byte{'\n'}) {
		if len(ln) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(ln, &r); err != nil {
			return out, fmt.Errorf("%s: line %d after offset: %w", t.path, i+1, err)
		}
		r.Source = filepath.Base(t.path)
		out = append(out, r)
	}
	return out, nil
}

// SortByMono orders records by mono_ns (stable, so one file's order is kept).
func SortByMono(rs []Record) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].MonoNS < rs[j].MonoNS })
}
