package house

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"stackshot/internal/testutil"
)

// maxReadmeLines: the README is read in five minutes; the rest is in docs/.
const maxReadmeLines = 300

func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testutil.Root(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md is %d lines (most %d): move the detail into docs/", n, maxReadmeLines)
	}
}

var (
	fence    = regexp.MustCompile("(?ms)^```.*?^```")
	codeSpan = regexp.MustCompile("`[^`\n]*`")
	mdLink   = regexp.MustCompile(`\[[^\]\n]*\]\(([^)\s]+)\)`)
)

// Every relative link of the README, the changelog and docs/*.md names a
// file of the repository (a clone has nothing beside it), and an anchor
// names a heading of that file.
func TestDocLinksResolve(t *testing.T) {
	root := testutil.Root()
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files := append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md")}, docs...)
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		text := codeSpan.ReplaceAllString(fence.ReplaceAllString(string(b), ""), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			if err := checkLink(root, f, m[1]); err != "" {
				t.Errorf("%s: link %s: %s", rel, m[1], err)
			}
		}
	}
}

// checkLink says what is wrong with link target in file, or "".
func checkLink(root, file, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return "" // (a web page, not a file of the clone)
	}
	path, anchor, _ := strings.Cut(target, "#")
	dest := file
	if path != "" {
		dest = filepath.Clean(filepath.Join(filepath.Dir(file), path))
	}
	if r, err := filepath.Rel(root, dest); err != nil || strings.HasPrefix(r, "..") {
		return "points outside the repository"
	}
	if _, err := os.Stat(dest); err != nil {
		return "no such file in the repository"
	}
	if anchor == "" {
		return ""
	}
	b, err := os.ReadFile(dest)
	if err != nil || !strings.HasSuffix(dest, ".md") {
		return "an anchor into a file that is not markdown"
	}
	for _, l := range strings.Split(fence.ReplaceAllString(string(b), ""), "\n") {
		if h := strings.TrimLeft(l, "#"); h != l && strings.HasPrefix(h, " ") && slug(h) == anchor {
			return ""
		}
	}
	return "no heading of " + filepath.Base(dest) + " makes that anchor"
}

// slug is a heading's anchor as the usual renderers make it: lower case,
// punctuation dropped, spaces to hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
