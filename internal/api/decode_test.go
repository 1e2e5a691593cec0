package api

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/errs"
)

// A malformed request is the caller's mistake (invalid) and keeps its
// cause: the decoder's error is still reachable through errors.As.
func TestDecodeKeepsTheCause(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/x", strings.NewReader(`{"a": "not a number"}`))
	var v struct {
		A int `json:"a"`
	}
	err := decode(r, &v)
	if !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("not invalid: %v", err)
	}
	var ute *json.UnmarshalTypeError
	if !errors.As(err, &ute) || ute.Field != "a" {
		t.Errorf("the decoder's error is lost: %v", err)
	}
}
