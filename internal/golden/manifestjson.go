package golden

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"unicode/utf8"
)

// decodeManifest decodes a manifest file. A golden with slots lists
// 11,000+ files (1.9 MB of JSON): encoding/json took 16-20 ms for it (12
// ms even with the file list left raw: its scanner reads the whole input
// before decoding), a reader of our own 5-12 ms in a fresh process, and
// most lookups never use the list. So the "files" array is only found
// here (its strings and brackets followed, its values not read) and kept
// as it is, for Files to decode on first use with the reader below; the
// rest of the object, a few hundred bytes, goes to encoding/json.
// Anything this does not expect sends the whole file to encoding/json,
// which decides what it means (and words the error). data must not be
// changed afterwards.
func decodeManifest(data []byte) (*Manifest, error) {
	if start, end, slotsLast, ok := locateFiles(data); ok {
		rest := make([]byte, 0, len(data)-(end-start)+2)
		rest = append(append(append(rest, data[:start]...), "[]"...), data[end:]...)
		var m Manifest
		if err := json.Unmarshal(rest, &m); err == nil {
			m.files, m.list = nil, &fileList{raw: data[start:end], slotsLast: slotsLast && len(m.SlotDirs) > 0}
			return &m, nil
		}
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// fileList is a manifest's "files" array as read, decoded once when
// first asked for.
type fileList struct {
	raw []byte
	// slotsLast: the list is as this version writes it, the slots' files
	// after all others (slotFilesLast).
	slotsLast bool
	once      sync.Once
	files     []File
	err       error
}

func (l *fileList) all() ([]File, error) {
	l.once.Do(func() {
		r := &jsonReader{b: l.raw, s: string(l.raw)}
		files, ok := r.files()
		if !ok || !r.end() {
			l.err = errors.New("its file list is not a list of files")
			return
		}
		l.files = files
	})
	return l.files, l.err
}

// without decodes the files that are not below one of the dirs in skip
// (each "base/<oid>"), reading no more of the others than their path.
// Where the slots' files come last, it stops at the first of them:
// should a file be listed after them (a manifest edited by hand), the
// check that reads this finds that file on disk and not in its list,
// and fails.
func (l *fileList) without(skip map[string]bool) ([]File, error) {
	r := &jsonReader{b: l.raw, skipDirs: skip, stopAtSkipped: l.slotsLast}
	files, ok := r.files()
	if !ok || !r.stopped && !r.end() {
		return nil, errors.New("its file list is not a list of files")
	}
	return files, nil
}

// slotFilesLast orders files (sorted by path) for the manifest: every
// file outside the slots' dirs in their order, then the slots' files.
// A check that leaves the slots out reads the list up to the first of
// those (fileList.without).
func slotFilesLast(files []File, slotDirs []string) []File {
	if len(slotDirs) == 0 {
		return files
	}
	dirs := make(map[string]bool, len(slotDirs))
	for _, d := range slotDirs {
		dirs[d] = true
	}
	out := make([]File, 0, len(files))
	var slots []File
	for _, f := range files {
		if below(f.Path, dirs) {
			slots = append(slots, f)
		} else {
			out = append(out, f)
		}
	}
	return append(out, slots...)
}

// filesWithout are the golden's files but those below the dirs in skip.
func (m *Manifest) filesWithout(skip map[string]bool) ([]File, error) {
	if m.list == nil || len(skip) == 0 {
		all, err := m.Files()
		if err != nil || len(skip) == 0 {
			return all, err
		}
		out := make([]File, 0, len(all))
		for _, f := range all {
			if !below(f.Path, skip) {
				out = append(out, f)
			}
		}
		return out, nil
	}
	return m.list.without(skip)
}

// below: path is inside one of the dirs (two components deep) in dirs.
func below(path string, dirs map[string]bool) bool {
	d := topDirs(path, 2)
	return len(d) < len(path) && dirs[d]
}

// locateFiles finds the value of the top-level key "files" (an array;
// the last one, as encoding/json would) in data: [start, end).
//
// A manifest that names its slot_dirs before its files was written by
// this version (MarshalJSON), so its file list comes last, its slots'
// files at its end: slotsLast, and the list is taken to end at the
// object's last "]" without being read (a 32-slot golden's 1.9 MB: 2 ms
// of `dbfork up`). Files checks that when it reads the list: a list that
// does not end there is an error then, as any bad list is.
func locateFiles(data []byte) (start, end int, slotsLast, ok bool) {
	r := &jsonReader{b: data}
	if !r.next('{') || r.next('}') {
		return 0, 0, false, false
	}
	slotDirs := false
	for {
		key, err := r.key()
		if err != nil || !r.next(':') {
			return 0, 0, false, false
		}
		r.space()
		at := r.i
		files := string(key) == "files"
		if files && (at >= len(data) || data[at] != '[') {
			return 0, 0, false, false // null, or not a list: encoding/json decides
		}
		if files && slotDirs {
			if e := lastListEnd(data); e > at {
				return at, e, true, true
			}
		}
		slotDirs = slotDirs || string(key) == "slot_dirs"
		if !r.skipFast(0) {
			return 0, 0, false, false
		}
		if files {
			start, end, ok = at, r.i, true
		}
		if r.next('}') {
			return start, end, false, ok && r.end()
		}
		if !r.next(',') {
			return 0, 0, false, false
		}
	}
}

// lastListEnd is the end of data's last value when data ends with a list
// closing its object ("]" "}", white space around), else 0.
func lastListEnd(data []byte) int {
	i := len(data)
	for i > 0 && isSpace(data[i-1]) {
		i--
	}
	if i == 0 || data[i-1] != '}' {
		return 0
	}
	i--
	for i > 0 && isSpace(data[i-1]) {
		i--
	}
	if i == 0 || data[i-1] != ']' {
		return 0
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// jsonReader reads JSON values from b at i. s holds b's bytes as a
// string: the strings read are slices of it, one copy for all of them
// (a 32-slot golden's list has 22,000 paths and sums).
type jsonReader struct {
	b []byte
	s string // b as a string, or "": each string read is a copy
	i int
	// skipDirs: files (entries) whose path is below one of these dirs
	// are left out, read no further than their path; with stopAtSkipped
	// the list ends at the first of them (stopped).
	skipDirs      map[string]bool
	stopAtSkipped bool
	stopped       bool
}

// sub is b[from:to] as a string.
func (r *jsonReader) sub(from, to int) string {
	if r.s != "" {
		return r.s[from:to]
	}
	return string(r.b[from:to])
}

var errJSON = errors.New("unexpected JSON")

func (r *jsonReader) space() {
	b, i := r.b, r.i // locals: r.i++ in the loop made each byte wait for a store
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\t' || b[i] == '\r') {
		i++
	}
	r.i = i
}

// next skips white space and says whether the next byte is c (and
// consumes it when it is).
func (r *jsonReader) next(c byte) bool {
	r.space()
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// str reads a string. Strings without escapes are sliced as they are;
// those with escapes (or bytes that are not UTF-8) go to encoding/json.
func (r *jsonReader) str() (string, error) { return r.strKeep(true) }

// strKeep reads a string, and returns it only when keep is set.
func (r *jsonReader) strKeep(keep bool) (string, error) {
	r.space()
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return "", errJSON
	}
	start := r.i
	// The common case: no escape, nothing but ASCII up to the next quote.
	if n := bytes.IndexByte(r.b[start+1:], '"'); n >= 0 {
		end := start + 1 + n
		if plainASCII(r.b[start+1 : end]) {
			r.i = end + 1
			if !keep {
				return "", nil
			}
			return r.sub(start+1, end), nil
		}
	}
	plain := true
	for j := r.i + 1; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			r.i = j + 1
			if !keep {
				return "", nil
			}
			if plain {
				return r.sub(start+1, j), nil
			}
			var s string
			if err := json.Unmarshal(r.b[start:j+1], &s); err != nil {
				return "", err
			}
			return s, nil
		case c == '\\':
			plain = false
			j++ // the escaped byte cannot end the string
		case c < 0x20:
			return "", errJSON
		case c >= utf8.RuneSelf:
			plain = false
		}
	}
	return "", errJSON
}

// plainASCII: no escape, no control character, nothing but ASCII.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// key reads an object's key: the bytes between the quotes, without a
// copy, when it has no escapes.
func (r *jsonReader) key() ([]byte, error) {
	r.space()
	start := r.i + 1
	s, err := r.strKeep(false)
	if err != nil {
		return nil, err
	}
	raw := r.b[start : r.i-1]
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			r.i = start - 1
			if s, err = r.str(); err != nil {
				return nil, err
			}
			return []byte(s), nil
		}
	}
	return raw, nil
}

// skip reads past one value of any kind.
func (r *jsonReader) skip() error {
	r.space()
	if r.i >= len(r.b) {
		return errJSON
	}
	switch r.b[r.i] {
	case '"':
		_, err := r.strKeep(false)
		return err
	case '{', '[':
		open, close := r.b[r.i], byte('}')
		if open == '[' {
			close = ']'
		}
		r.i++
		if r.next(close) {
			return nil
		}
		for {
			if open == '{' {
				if _, err := r.strKeep(false); err != nil {
					return err
				}
				if !r.next(':') {
					return errJSON
				}
			}
			if err := r.skip(); err != nil {
				return err
			}
			if r.next(close) {
				return nil
			}
			if !r.next(',') {
				return errJSON
			}
		}
	default: // number, true, false, null
		start := r.i
		for r.i < len(r.b) {
			c := r.b[r.i]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			r.i++
		}
		if r.i == start {
			return errJSON
		}
		return nil
	}
}

// integer reads an integer that fits in bits bits.
func (r *jsonReader) integer(bits int, signed bool) (int64, error) {
	r.space()
	start := r.i
	for r.i < len(r.b) && (r.b[r.i] == '-' || r.b[r.i] >= '0' && r.b[r.i] <= '9') {
		r.i++
	}
	if signed {
		return strconv.ParseInt(string(r.b[start:r.i]), 10, bits)
	}
	u, err := strconv.ParseUint(string(r.b[start:r.i]), 10, bits)
	return int64(u), err
}

// files reads a manifest's file list; ok is false for anything but an
// array of objects with the fields File has (others skipped).
func (r *jsonReader) files() ([]File, bool) {
	if !r.next('[') {
		return nil, false
	}
	if r.next(']') {
		return []File{}, true
	}
	n := (len(r.b)-r.i)/150 + 1
	if r.stopAtSkipped {
		n = min(n, 1024) // most of the list is the slots' files, not read
	}
	return r.entries(make([]File, 0, n))
}

// entries reads the list's entries from r.i on, up to and past its "]"
// (or, with stopAtSkipped, up to the first entry below a skipped dir).
func (r *jsonReader) entries(files []File) ([]File, bool) {
	for {
		if !r.next('{') {
			return nil, false
		}
		var f File
		leave := false // below a dir left out (skipDirs)
		if !r.next('}') {
			for first := true; ; first = false {
				key, err := r.key()
				if err != nil || !r.next(':') {
					return nil, false
				}
				switch string(key) { // compared without a copy

				case "path":
					if r.skipDirs != nil && first {
						r.space()
						valueAt := r.i
						if p, perr := r.key(); perr == nil && below(string(p), r.skipDirs) {
							if r.stopAtSkipped {
								r.stopped = true
								return files, true
							}
							leave = true
							err = r.skipRest()
							break
						}
						r.i = valueAt
					}
					f.Path, err = r.str()
				case "sha256":
					f.SHA256, err = r.str()
				case "link":
					f.Link, err = r.str()
				case "size":
					f.Size, err = r.integer(64, true)
				case "mode":
					var v int64
					v, err = r.integer(32, false)
					f.Mode = uint32(v)
				default:
					err = r.skip()
				}
				if err != nil {
					return nil, false
				}
				if leave || r.next('}') {
					break
				}
				if !r.next(',') {
					return nil, false
				}
			}
		}
		if !leave && (r.skipDirs == nil || !below(f.Path, r.skipDirs)) {
			files = append(files, f)
		}
		if r.next(']') {
			return files, true
		}
		if !r.next(',') {
			return nil, false
		}
	}
}

// skipRest reads past the rest of an object (after one of its values)
// up to and including its "}".
func (r *jsonReader) skipRest() error {
	if !r.skipFast(1) {
		return errJSON
	}
	return nil
}

// skipFast reads past a value (depth 0), or past the rest of an object
// or array already open (depth 1), following only strings and brackets:
// a string is skipped to its closing quote (found by IndexByte), and
// nothing else is checked. What it passes over is read again, checked,
// by encoding/json or Files, so it only has to find the end. Locating a
// 32-slot golden's list this way takes ~1 ms where reading it takes 5.
func (r *jsonReader) skipFast(depth int) bool {
	r.space()
	b, i := r.b, r.i
	if depth == 0 && i < len(b) && b[i] != '"' && b[i] != '[' && b[i] != '{' {
		return r.skip() == nil // a number or literal: the checked reader
	}
	for i < len(b) {
		for i < len(b) && !structural[b[i]] {
			i++
		}
		if i == len(b) {
			break
		}
		switch b[i] {
		case '"':
			end, ok := stringEnd(b, i)
			if !ok {
				return false
			}
			i = end
			if depth == 0 {
				r.i = i
				return true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth <= 0 {
				r.i = i + 1
				return depth == 0
			}
		}
		i++
	}
	return false
}

// structural are the bytes skipFast stops at.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// stringEnd is where the string opening at b[i] ends (after its quote).
func stringEnd(b []byte, i int) (int, bool) {
	j := i + 1
	for {
		n := bytes.IndexByte(b[j:], '"')
		if n < 0 {
			return 0, false
		}
		j += n
		k := j // an even run of backslashes before it: the quote ends it
		for k > i+1 && b[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1, true
		}
		j++
	}
}

// end says whether only white space is left.
func (r *jsonReader) end() bool {
	r.space()
	return r.i == len(r.b)
}
