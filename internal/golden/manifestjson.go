package golden

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// decodeManifest decodes a manifest file. A golden with slots lists
// 11,000+ files (1.9 MB of JSON) and encoding/json took 16-20 ms for it
// on every `dbfork up`, `run` or `ls` that looked the golden up (12 ms
// even with the file list left raw: its scanner reads the whole input
// before decoding); its own reading of the file list is most of that.
// So the "files" array is read here by a small reader of its own, the
// rest of the object, a few hundred bytes, by encoding/json. Anything
// this reader does not expect sends the whole file to encoding/json,
// which decides what it means (and words the error).
func decodeManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if files, start, end, ok := readFiles(data); ok {
		rest := make([]byte, 0, len(data)-(end-start)+2)
		rest = append(append(append(rest, data[:start]...), "[]"...), data[end:]...)
		if err := json.Unmarshal(rest, &m); err == nil {
			m.Files = files
			return &m, nil
		}
	}
	m = Manifest{}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// jsonReader reads JSON values from b at i.
type jsonReader struct {
	b []byte
	i int
}

var errJSON = errors.New("unexpected JSON")

func (r *jsonReader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
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
	plain := true
	for j := r.i + 1; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			r.i = j + 1
			if !keep {
				return "", nil
			}
			if plain {
				return string(r.b[start+1 : j]), nil
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

// readFiles reads the value of the top-level key "files" (an array of
// files) of a manifest, and where it is in data: [start, end).
func readFiles(data []byte) (files []File, start, end int, ok bool) {
	r := &jsonReader{b: data}
	if !r.next('{') || r.next('}') {
		return nil, 0, 0, false
	}
	for {
		key, err := r.str()
		if err != nil || !r.next(':') {
			return nil, 0, 0, false
		}
		r.space()
		at := r.i
		if key == "files" && at < len(data) && data[at] == '[' {
			if files, ok = r.files(); !ok {
				return nil, 0, 0, false
			}
			start, end = at, r.i
		} else if err := r.skip(); err != nil {
			return nil, 0, 0, false
		}
		if r.next('}') {
			return files, start, end, ok && r.end()
		}
		if !r.next(',') {
			return nil, 0, 0, false
		}
	}
}

// files reads a manifest's file list; ok is false for anything but an
// array of objects with the fields File has (others skipped).
func (r *jsonReader) files() ([]File, bool) {
	if !r.next('[') {
		return nil, false
	}
	files := make([]File, 0, (len(r.b)-r.i)/150)
	if r.next(']') {
		return files, true
	}
	for {
		if !r.next('{') {
			return nil, false
		}
		var f File
		if !r.next('}') {
			for {
				key, err := r.key()
				if err != nil || !r.next(':') {
					return nil, false
				}
				switch string(key) { // compared without a copy

				case "path":
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
				if r.next('}') {
					break
				}
				if !r.next(',') {
					return nil, false
				}
			}
		}
		files = append(files, f)
		if r.next(']') {
			return files, true
		}
		if !r.next(',') {
			return nil, false
		}
	}
}

// end says whether only white space is left.
func (r *jsonReader) end() bool {
	r.space()
	return r.i == len(r.b)
}
