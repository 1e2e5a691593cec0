package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine/engines"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/store"
)

type doctorReport struct {
	Store struct {
		Path       string `json:"path"`
		FS         string `json:"filesystem"`
		FreeBytes  uint64 `json:"free_bytes"`
		LoopImage  string `json:"loop_image,omitempty"`
		LoopCache  string `json:"loop_cache,omitempty"` // "write through" (flushes dropped) or "write back"
		ServerUser string `json:"server_user"`
		// Goldens: what the store's goldens take (their manifests'
		// sizes), intermediate goldens (the step cache) apart.
		Goldens struct {
			Count             int   `json:"count"`
			Bytes             int64 `json:"bytes"`
			Intermediate      int   `json:"intermediate"`
			IntermediateBytes int64 `json:"intermediate_bytes"`
		} `json:"goldens"`
	} `json:"store"`
	Backends []backend.Probe `json:"backends"`
	Auto     struct {
		Backend string `json:"backend"`
		Why     string `json:"why"`
		caps    backend.Caps
	} `json:"auto"`
	Engines   []engineReport    `json:"engines"`
	Cache     engineCacheReport `json:"engine_cache"`
	HugePages hugePagesReport   `json:"huge_pages"`
	Tools     map[string]string `json:"tools"`
	Advice    []string          `json:"advice"`
}

type engineReport struct {
	Engine  string `json:"engine"`
	OK      bool   `json:"ok"`
	Bindir  string `json:"bindir,omitempty"`
	Version string `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
}

func newDoctorCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say which clone backends and server binaries work here, which one auto picks, and how to fix the rest",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := g.openStore()
			if err != nil {
				return err
			}
			var rep doctorReport
			rep.Store.Path = s.Root
			rep.Store.FS, _ = fsutil.FSType(s.Root)
			rep.Store.FreeBytes, _ = fsutil.FreeBytes(s.Root)
			rep.Store.ServerUser = s.User.Name
			if all, err := golden.List(s); err == nil {
				gs := &rep.Store.Goldens
				for _, gd := range all {
					if gd.Manifest.Intermediate != nil {
						gs.Intermediate++
						gs.IntermediateBytes += gd.Manifest.Disk()
					} else {
						gs.Count++
						gs.Bytes += gd.Manifest.Disk()
					}
				}
			}
			if s.User.Dropped() {
				rep.Store.ServerUser = "a uid of their own each (group " + s.User.Name + ")"
			}
			if _, err := os.Stat(store.ImagePath(s.Root)); err == nil {
				rep.Store.LoopImage = store.ImagePath(s.Root)
				if dev, _ := fsutil.LoopDevice(s.Root); dev != "" {
					rep.Store.LoopCache = "write back"
					if fsutil.LoopWriteThrough(dev) {
						rep.Store.LoopCache = "write through"
					}
				}
			}
			rep.Backends = backend.ProbeAll(ctx, s.InstancesDir())
			if b, why, err := backend.Select(ctx, "auto", s.InstancesDir(), ""); err == nil {
				rep.Auto.Backend, rep.Auto.Why, rep.Auto.caps = b.Name(), why, b.Caps()
			}
			rep.Engines = probeEngines(ctx)
			rep.Cache = cacheReport(g.fetchOptions(s))
			rep.Tools = map[string]string{}
			for _, t := range []string{"mkfs.xfs", "mkfs.btrfs", "mount"} {
				if p, err := exec.LookPath(t); err == nil {
					rep.Tools[t] = p
				} else {
					rep.Tools[t] = "missing"
				}
			}
			rep.HugePages = readHugePages()
			rep.Advice = append(rep.Advice, advice(rep)...)
			if a := rep.HugePages.advice(); a != "" {
				rep.Advice = append(rep.Advice, a)
			}
			if asJSON {
				return printJSON(g.stdout, rep)
			}
			printDoctor(g, rep)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func advice(rep doctorReport) []string {
	cheap := false
	for _, p := range rep.Backends {
		if p.OK && p.Caps().SharesExtents {
			cheap = true
		}
	}
	out := rootlessAdvice(rep)
	if cheap {
		return out
	}
	msg := fmt.Sprintf("the store (%s) cannot snapshot or reflink, so a clone's first write to a table copies the whole file (overlay) or every clone is a full copy; ", rep.Store.FS)
	if rep.Auto.caps.CopiesUp {
		msg = firstWriteTrap + ": "
	}
	switch {
	case os.Geteuid() != 0:
		msg += "ask an admin to run this once: sudo dbfork store init --user " + currentUserName() +
			" (a copy-on-write store of your own that dbfork then finds by itself; no root after that); or " + rootlessFastStore
	case rep.Tools["mkfs.xfs"] == "missing" && rep.Tools["mkfs.btrfs"] == "missing":
		msg += "install xfsprogs (apt-get install xfsprogs) and run: dbfork store init --fs xfs --size 20G"
	default:
		msg += "create a loop-backed store: dbfork store init --fs xfs --size 20G (or --fs btrfs)"
	}
	out = append(out, msg)
	return out
}

func printDoctor(g *globals, rep doctorReport) {
	w := g.stdout
	fmt.Fprintf(w, "store      %s (%s, %s free", rep.Store.Path, rep.Store.FS, humanBytes(int64(rep.Store.FreeBytes)))
	if rep.Store.LoopImage != "" {
		fmt.Fprintf(w, ", loop image %s", rep.Store.LoopImage)
		switch rep.Store.LoopCache {
		case "write through":
			fmt.Fprint(w, " without cache flushes, synced when something is published")
		case "write back":
			fmt.Fprint(w, " with cache flushes")
		}
	}
	fmt.Fprintf(w, "), servers run as %s\n", rep.Store.ServerUser)
	gs := rep.Store.Goldens
	fmt.Fprintf(w, "goldens    %d (%s), intermediate goldens of the step cache %d (%s); `dbfork gc` expires them\n\nbackends\n",
		gs.Count, humanBytes(gs.Bytes), gs.Intermediate, humanBytes(gs.IntermediateBytes))
	for _, p := range rep.Backends {
		if p.OK {
			fmt.Fprintf(w, "  ok    %-14s %s\n", p.Name, p.Describe())
		} else {
			fmt.Fprintf(w, "  no    %-14s %s\n", p.Name, p.Error)
		}
	}
	if rep.Auto.Backend != "" {
		fmt.Fprintf(w, "  auto picks %s: %s\n", rep.Auto.Backend, rep.Auto.Why)
	}
	fmt.Fprintln(w, "\nengines")
	for _, e := range rep.Engines {
		if e.OK {
			fmt.Fprintf(w, "  ok    %-8s %s (%s)\n", e.Engine, e.Version, e.Bindir)
		} else {
			fmt.Fprintf(w, "  no    %-8s %s\n", e.Engine, e.Error)
		}
	}
	printCacheReport(w, rep.Cache)
	if h := rep.HugePages; h.PageBytes > 0 {
		fmt.Fprintf(w, "\nmemory     huge pages of %s for the servers' shared memory: %d reserved (vm.nr_hugepages), up to %d made on demand (vm.nr_overcommit_hugepages)\n",
			humanBytes(int64(h.PageBytes)), h.Reserved, h.Overcommit)
	}
	if len(rep.Advice) > 0 {
		fmt.Fprintln(w, "\nto do")
		for _, a := range rep.Advice {
			fmt.Fprintf(w, "  - %s\n", a)
		}
	}
}

func probeEngines(ctx context.Context) []engineReport {
	var out []engineReport
	for _, name := range engines.Names() {
		e, _ := engines.Lookup(name)
		er := engineReport{Engine: name}
		if bindir, version, err := e.Installed(ctx); err != nil {
			er.Error = err.Error()
		} else {
			er.OK, er.Bindir, er.Version = true, bindir, version
		}
		out = append(out, er)
	}
	return out
}

// currentUserName is our user's name, or the uid when it has none.
func currentUserName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Geteuid())
}

// hugePagesReport is what the kernel can give a server's shared memory in
// huge pages. PostgreSQL asks for them by itself (huge_pages = try) and
// takes 4 KiB pages when there are none: then every new backend faults
// in, and at exit unmaps, the shared buffers it touches page by page.
type hugePagesReport struct {
	PageBytes  uint64 `json:"page_bytes"` // 0: the kernel has none
	Reserved   uint64 `json:"reserved"`   // vm.nr_hugepages
	Overcommit uint64 `json:"overcommit"` // vm.nr_overcommit_hugepages
}

func readHugePages() hugePagesReport {
	return hugePagesReport{PageBytes: proc.MemInfo("Hugepagesize"),
		Reserved: proc.SysctlUint("vm.nr_hugepages"), Overcommit: proc.SysctlUint("vm.nr_overcommit_hugepages")}
}

// advice is the tuning line for a kernel that could give huge pages but
// is set to give none.
func (h hugePagesReport) advice() string {
	if h.PageBytes == 0 || h.Reserved > 0 || h.Overcommit > 0 {
		return ""
	}
	return fmt.Sprintf("optional, for many fresh databases per second: let PostgreSQL servers use %s pages for their shared memory, made on demand and given back when they stop: "+
		"sudo sysctl -w vm.nr_overcommit_hugepages=1024 (and the same line in /etc/sysctl.d/ to keep it); "+
		"with 8 test clients on 2 cores PostgreSQL 18 made 8-15 %% more fresh databases per second, 15 about 1-3 %% (docs/performance.md)", humanBytes(int64(h.PageBytes)))
}
