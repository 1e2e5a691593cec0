package api

import (
	"encoding/json"
	"net/http"
	"testing"
)

// /v1/health says which API version the daemon speaks and which dbfork it
// is: the clients refuse a daemon of another API version by it.
func TestHealthReportsAPIVersion(t *testing.T) {
	addr := serveTCP(t, &stub{})
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/health", nil)
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if h["api"] != float64(APIVersion) || h["version"] != Version() || h["version"] == "" {
		t.Fatalf("health = %v, want api %d and version %q", h, APIVersion, Version())
	}
}

// A release build's stamp wins over what the toolchain recorded.
func TestVersionStamp(t *testing.T) {
	if v := Version(); len(v) < 3 || v[:3] != "dev" {
		t.Fatalf("unstamped test binary: version %q, want dev…", v)
	}
	old := stamp
	t.Cleanup(func() { stamp = old })
	stamp = "1.2.3"
	if v := Version(); v != "1.2.3" {
		t.Fatalf("stamped version %q, want 1.2.3", v)
	}
}
