package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// Probe runs a version probe (ProbeCommand) and returns what it printed
// on stdout; ProbeCombined returns stdout and stderr together. Answers
// are remembered, keyed by the binary's identity (device, inode, size,
// mtime, ctime of the file the path resolves to) and the arguments:
// opening an engine asked `postgres -V` of the same binary up to six
// times and `pg_config` twice, ~120 ms of every `dbfork up` (Debian's
// postgres -V alone takes 10-12 ms to load its libraries). A binary
// replaced meanwhile is a new identity and is asked again. An ELF
// binary's answer depends on nothing else, so it is also kept across
// runs in the store's probe cache (SetProbeCache); a script's (Debian's
// pg_config and psql, which answer for whatever else is installed) only
// for probeTTL in this process. Failed probes are not remembered.
func Probe(ctx context.Context, path string, args ...string) ([]byte, error) {
	return probe(ctx, false, path, args)
}

// ProbeCombined is Probe with stderr in the answer too.
func ProbeCombined(ctx context.Context, path string, args ...string) ([]byte, error) {
	return probe(ctx, true, path, args)
}

// probeTTL is how long a probe's answer is reused.
const probeTTL = 30 * time.Second

type probeAnswer struct {
	out []byte
	at  time.Time
	elf bool // kept for good (and across runs)
}

var probes sync.Map // probeKey -> probeAnswer

func probe(ctx context.Context, combined bool, path string, args []string) ([]byte, error) {
	key, elf, keyed := probeKey(path, combined, args)
	if keyed {
		loadProbeCache()
		if v, ok := probes.Load(key); ok {
			if a := v.(probeAnswer); a.elf || time.Since(a.at) < probeTTL {
				return append([]byte(nil), a.out...), nil
			}
		}
	}
	cmd := ProbeCommand(ctx, path, args...)
	var out []byte
	var err error
	if combined {
		out, err = cmd.CombinedOutput()
	} else {
		out, err = cmd.Output()
	}
	if err == nil && keyed {
		probes.Store(key, probeAnswer{append([]byte(nil), out...), time.Now(), elf})
		if elf {
			saveProbeCache()
		}
	}
	return out, err
}

// probeKey names what a probe's answer depends on: the file path
// resolves to (looked up on PATH when it has no slash, as exec does), by
// identity rather than by name, and the arguments. ok is false when the
// file cannot be stat'ed (the probe then runs and fails on its own);
// elf says the file is an ELF binary rather than a script.
func probeKey(path string, combined bool, args []string) (key string, elf, ok bool) {
	p := path
	if !strings.Contains(p, "/") {
		lp, err := exec.LookPath(p)
		if err != nil {
			return "", false, false
		}
		p = lp
	}
	f, err := os.Open(p)
	if err != nil {
		return "", false, false
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return "", false, false
	}
	elf = isELF(f)
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d:%t:%q", st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, combined, args), elf, true
}

// The probe cache on disk: ELF binaries' answers by identity, in a file
// of the store's that only this uid can write (a file anybody else could
// write is neither read nor written: a planted answer could make dbfork
// take one server version for another).
var probeCache struct {
	sync.Mutex
	path   string
	loaded bool
}

// probeCacheMax bounds the answers kept on disk (binaries replaced by
// upgrades leave answers nobody asks for again).
const probeCacheMax = 64

// SetProbeCache names the file probe answers are kept in across runs
// ("" for none); the CLI sets it to one in the store's cache dir.
func SetProbeCache(path string) {
	probeCache.Lock()
	defer probeCache.Unlock()
	probeCache.path, probeCache.loaded = path, false
}

type cachedProbe struct {
	Out []byte    `json:"out"`
	At  time.Time `json:"at"`
}

func loadProbeCache() {
	probeCache.Lock()
	defer probeCache.Unlock()
	if probeCache.loaded || probeCache.path == "" {
		return
	}
	probeCache.loaded = true
	data, err := readOwnFile(probeCache.path)
	if err != nil {
		return
	}
	var m map[string]cachedProbe
	if json.Unmarshal(data, &m) != nil {
		return
	}
	for k, c := range m {
		probes.LoadOrStore(k, probeAnswer{c.Out, c.At, true})
	}
}

func saveProbeCache() {
	probeCache.Lock()
	defer probeCache.Unlock()
	if probeCache.path == "" {
		return
	}
	if fi, err := os.Lstat(probeCache.path); err == nil && !ownFile(fi) {
		return
	}
	m := map[string]cachedProbe{}
	probes.Range(func(k, v any) bool {
		if a := v.(probeAnswer); a.elf {
			m[k.(string)] = cachedProbe{a.out, a.at}
		}
		return true
	})
	for len(m) > probeCacheMax { // the oldest go first
		var oldest string
		for k, c := range m {
			if oldest == "" || c.At.Before(m[oldest].At) {
				oldest = k
			}
		}
		delete(m, oldest)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(probeCache.path), 0o755); err != nil {
		return
	}
	_ = fsutil.WriteFileAtomic(probeCache.path, data, 0o600)
}

// readOwnFile reads path only when it is a regular file of this uid that
// nobody else can write.
func readOwnFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !ownFile(fi) {
		return nil, fmt.Errorf("%s is not this user's alone", path)
	}
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

func ownFile(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode().IsRegular() && int(st.Uid) == os.Geteuid() && fi.Mode().Perm()&0o022 == 0
}

// IsELF says whether path (links followed) is an ELF binary.
func IsELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return isELF(f)
}

func isELF(f *os.File) bool {
	magic := make([]byte, 4)
	n, _ := f.ReadAt(magic, 0)
	return n == 4 && string(magic) == "\x7fELF"
}

// forgetProbes drops every answer remembered in this process (tests).
func forgetProbes() {
	probes.Range(func(k, _ any) bool { probes.Delete(k); return true })
	probeCache.Lock()
	path := probeCache.path
	probeCache.Unlock()
	SetProbeCache(path)
}
