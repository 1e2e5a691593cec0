// Package golden builds, publishes, finds and reaps goldens: frozen data
// dirs stored under the sha256 key of everything that made them.
package golden

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/recipe"
)

// formatVersion changes whenever the way dbfork builds goldens changes in
// a way that makes old goldens wrong for new code.
const formatVersion = 1

// Input is one recipe input and the hash of its content.
type Input struct {
	Step   int    `json:"step"`
	Kind   string `json:"kind"`
	Path   string `json:"path"` // relative to the recipe dir where possible
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// keyMaterial is what the key hashes; its JSON form is canonical (struct
// fields in order, map keys sorted by encoding/json).
type keyMaterial struct {
	Format        int               `json:"format"`
	Engine        string            `json:"engine"`
	ServerVersion string            `json:"server_version"`
	Init          map[string]string `json:"init"`
	Freeze        bool              `json:"freeze"`
	Steps         []keyStep         `json:"steps"`
	Slots         int               `json:"slots,omitempty"` // omitted at 0: older keys stay
}

type keyStep struct {
	Kind    string   `json:"kind"`
	Command string   `json:"command,omitempty"`
	Inputs  []string `json:"inputs"` // "path sha256"
}

// Key computes a recipe's key for an engine, hashing every input (through
// the cache, so an unchanged multi-GB seed costs a stat per file).
func Key(ctx context.Context, eng engine.Engine, r *recipe.Recipe, hc *HashCache) (string, []Input, string, error) {
	if err := engine.CheckSlots(eng.Name(), filepath.Base(r.Path), r.Fresh.Slots); err != nil {
		return "", nil, "", err
	}
	version, err := eng.Version(ctx)
	if err != nil {
		return "", nil, "", err
	}
	m := keyMaterial{
		Format: formatVersion, Engine: eng.Name(), ServerVersion: version,
		Init: eng.InitOptions(ClusterOf(r)), Freeze: r.Freeze, Slots: r.Fresh.Slots,
	}
	var inputs []Input
	for i, st := range r.Steps {
		ks := keyStep{Kind: st.Kind, Command: st.Command, Inputs: []string{}}
		for _, f := range st.Files {
			if err := ctx.Err(); err != nil {
				return "", nil, "", err
			}
			sum, size, err := hc.SumAs(ctx, f)
			if err != nil {
				return "", nil, "", err
			}
			rel := r.Rel(f)
			ks.Inputs = append(ks.Inputs, rel+" "+sum)
			inputs = append(inputs, Input{Step: i + 1, Kind: st.Kind, Path: rel, Size: size, SHA256: sum})
		}
		m.Steps = append(m.Steps, ks)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return "", nil, "", err
	}
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:]), inputs, version, nil
}
