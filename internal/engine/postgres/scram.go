package postgres

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// scramIterations is the PBKDF2 iteration count of an instance's password
// verifier. Every TCP login makes the client run PBKDF2 with the count the
// server stored: PostgreSQL's default 4096 cost a Go client ~1 ms of CPU
// per connection (6 % of the whole machine's CPU at 8 test clients making
// a connection per test, measured with perf). Iterations slow down the
// guessing of weak passwords; an instance's password is 144 random bits
// made for it alone, which no count of iterations makes easier or harder
// to guess.
const scramIterations = 16

// scramVerifier is the SCRAM-SHA-256 secret of password as PostgreSQL
// stores it (RFC 5802/7677); given to ALTER ROLE … PASSWORD in this form
// it is stored as it is, whatever password_encryption says.
func scramVerifier(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, scramIterations, sha256.Size)
	if err != nil {
		return "", err
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", scramIterations, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key"))), nil
}
