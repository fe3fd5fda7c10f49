package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Dockerfile's default builder runs go.mod's Go (GOTOOLCHAIN=local
// would refuse an older one), and .dockerignore lets in what it copies.
func TestDockerfileMatchesModule(t *testing.T) {
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	gomod, dockerfile, ignore := read("go.mod"), read("Dockerfile"), read(".dockerignore")
	goVer := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(gomod)
	img := regexp.MustCompile(`(?m)^ARG GO_IMAGE=\S+:(\S+?)-`).FindStringSubmatch(dockerfile)
	if goVer == nil || img == nil || goVer[1] != img[1] {
		t.Errorf("go.mod says go %v; the Dockerfile's default GO_IMAGE is golang:%v", goVer, img)
	}
	for _, m := range regexp.MustCompile(`(?m)^COPY (?:--\S+ )*([^-\s]\S*(?: [^-\s]\S*)*) \S+$`).FindAllStringSubmatch(dockerfile, -1) {
		if strings.Contains(m[0], "--from=") {
			continue
		}
		for _, src := range strings.Fields(m[1]) {
			if !strings.Contains(ignore, "!"+src) && !strings.Contains(ignore, "!"+strings.TrimSuffix(src, "/")+"/") {
				t.Errorf(".dockerignore leaves out %s, which the Dockerfile copies (%s)", src, m[0])
			}
		}
	}
}
