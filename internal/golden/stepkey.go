package golden

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/dbfork/dbfork/internal/recipe"
)

// A step key names the state of a build after one [[load]] step: the
// data dir as it is when steps 1..n have run on a fresh cluster. It
// chains: step n's key hashes step n-1's key with what step n does, and
// step 1's "previous key" hashes what the cluster was made from (engine,
// server version, init options: the part of the golden's key material
// that is not steps). Freeze is not in it: Finish freezes once, at the
// end, so no intermediate state depends on it.
//
// The domain prefixes keep step keys apart from golden keys (which hash
// plain JSON): no step key can ever name a final golden or the other way
// round. The golden's own key is computed by Key exactly as before.
const (
	stepBaseDomain = "dbfork step base v1\n"
	stepKeyDomain  = "dbfork step v1\n"
)

// stepBase is the "previous key" of step 1.
func stepBase(engineName, version string, init map[string]string) string {
	data, _ := json.Marshal(struct {
		Format        int               `json:"format"`
		Engine        string            `json:"engine"`
		ServerVersion string            `json:"server_version"`
		Init          map[string]string `json:"init"`
	}{formatVersion, engineName, version, init})
	h := sha256.New()
	h.Write([]byte(stepBaseDomain))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// stepKeys returns the key of every step of r, in order, from the inputs
// Key hashed (their Step field says which step each belongs to).
func stepKeys(base string, r *recipe.Recipe, inputs []Input) []string {
	keys := make([]string, len(r.Steps))
	prev := base
	for i, st := range r.Steps {
		ks := keyStep{Kind: st.Kind, Command: st.Command, Inputs: []string{}}
		for _, in := range inputs {
			if in.Step == i+1 {
				ks.Inputs = append(ks.Inputs, in.Path+" "+in.SHA256)
			}
		}
		data, _ := json.Marshal(ks)
		h := sha256.New()
		h.Write([]byte(stepKeyDomain))
		h.Write([]byte(prev))
		h.Write([]byte{'\n'})
		h.Write(data)
		prev = hex.EncodeToString(h.Sum(nil))
		keys[i] = prev
	}
	return keys
}
