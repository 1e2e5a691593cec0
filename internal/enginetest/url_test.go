package enginetest_test

import (
	"fmt"
	"net/url"
)

// goDSNFromURL turns mysql://user:pw@host:port/db into the driver's form.
func goDSNFromURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	pw, _ := u.User.Password()
	return fmt.Sprintf("%s:%s@tcp(%s)%s", u.User.Username(), pw, u.Host, u.Path)
}
