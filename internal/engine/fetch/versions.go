package fetch

import (
	"sort"
	"strconv"
	"strings"
)

// versionKey splits "16.4.0" or "10.5.0-1" into numbers for ordering; a
// part that is not a number sorts first.
func versionKey(v string) []int {
	v = strings.ReplaceAll(v, "-", ".")
	var out []int
	for _, p := range strings.Split(v, ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			n = -1
		}
		out = append(out, n)
	}
	return out
}

// Less orders versions numerically: 16.9.0 < 16.10.0, 10.5.0 < 10.5.0-1.
func Less(a, b string) bool {
	ka, kb := versionKey(a), versionKey(b)
	for i := 0; i < len(ka) && i < len(kb); i++ {
		if ka[i] != kb[i] {
			return ka[i] < kb[i]
		}
	}
	return len(ka) < len(kb)
}

// Matches says whether a published version satisfies what a recipe asks
// for: "16" takes any 16.x, "16.4" any 16.4.x, "16.4.0" only itself.
func Matches(version, want string) bool {
	if want == "" {
		return true
	}
	return version == want || strings.HasPrefix(version, want+".") || strings.HasPrefix(version, want+"-")
}

// Newest returns the highest version that matches want, or "".
func Newest(versions []string, want string) string {
	best := ""
	for _, v := range versions {
		if Matches(v, want) && (best == "" || Less(best, v)) {
			best = v
		}
	}
	return best
}

// Sorted returns versions in ascending order without duplicates.
func Sorted(versions []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range versions {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return Less(out[i], out[j]) })
	return out
}

// Suggest names the versions worth showing when want exists nowhere: the
// ones of the same major version if there are any, else the newest of
// each major.
func Suggest(versions []string, want string) string {
	major := strings.SplitN(want, ".", 2)[0]
	var same []string
	newest := map[string]string{}
	var majors []string
	for _, v := range Sorted(versions) {
		m := strings.SplitN(v, ".", 2)[0]
		if m == major {
			same = append(same, v)
		}
		if _, ok := newest[m]; !ok {
			majors = append(majors, m)
		}
		newest[m] = v
	}
	if len(same) > 0 {
		return strings.Join(same, ", ")
	}
	var out []string
	for _, m := range majors {
		out = append(out, newest[m])
	}
	sort.Slice(out, func(i, j int) bool { return Less(out[i], out[j]) })
	return strings.Join(out, ", ")
}
