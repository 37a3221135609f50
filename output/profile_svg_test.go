package output

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"stackshot/internal/testutil"
)

type svgBox struct {
	title      string
	x, y, w    float64
	fill, text string
}

// parseSVG decodes the flame graph strictly and returns its boxes (the
// <g> elements under #frames) and every script's text.
func parseSVG(t *testing.T, data []byte) (boxes []svgBox, script string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	var stack []string
	var cur *svgBox
	inFrames := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse as XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if len(stack) == 0 && (el.Name.Local != "svg" || el.Name.Space != "http://www.w3.org/2000/svg") {
				t.Fatalf("root element %v", el.Name)
			}
			stack = append(stack, el.Name.Local)
			attr := func(n string) string {
				for _, a := range el.Attr {
					if a.Name.Local == n {
						return a.Value
					}
				}
				return ""
			}
			for _, a := range el.Attr {
				v := strings.ToLower(a.Value)
				if a.Name.Local == "href" || strings.Contains(v, "url(http") || strings.HasPrefix(v, "http") && a.Name.Local != "xmlns" {
					t.Errorf("external reference %s=%q", a.Name.Local, a.Value)
				}
			}
			switch {
			case el.Name.Local == "g" && attr("id") == "frames":
				inFrames = len(stack)
			case el.Name.Local == "g" && inFrames > 0 && len(stack) == inFrames+1:
				boxes = append(boxes, svgBox{})
				cur = &boxes[len(boxes)-1]
			case el.Name.Local == "rect" && cur != nil:
				cur.x, _ = strconv.ParseFloat(attr("x"), 64)
				cur.y, _ = strconv.ParseFloat(attr("y"), 64)
				cur.w, _ = strconv.ParseFloat(attr("width"), 64)
				cur.fill = attr("fill")
			case el.Name.Local == "script":
				if attr("href") != "" {
					t.Errorf("external script")
				}
			}
		case xml.EndElement:
			if len(stack) == inFrames {
				inFrames = 0
			}
			if el.Name.Local == "g" && cur != nil && len(stack) == inFrames+1 {
				cur = nil
			}
			stack = stack[:len(stack)-1]
		case xml.CharData:
			switch {
			case len(stack) > 0 && stack[len(stack)-1] == "script":
				script += string(el)
			case cur != nil && stack[len(stack)-1] == "title":
				cur.title += string(el)
			case cur != nil && stack[len(stack)-1] == "text":
				cur.text += string(el)
			}
		}
	}
	return boxes, script
}

func svgBytes(t *testing.T, p *Profile) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSVG(&buf, p); err != nil {
		t.Fatalf("WriteSVG: %v", err)
	}
	return buf.Bytes()
}

func TestSVG(t *testing.T) {
	p := fixtureProfile()
	data := svgBytes(t, p)
	boxes, script := parseSVG(t, data)

	// Every frame name of every folded stack is a box, under its own name.
	byName := map[string][]svgBox{}
	titleRe := regexp.MustCompile(`^(.*) \((\d+) samples?, ([\d.]+)%\)$`)
	for _, b := range boxes {
		m := titleRe.FindStringSubmatch(b.title)
		if m == nil {
			t.Fatalf("box title %q", b.title)
		}
		byName[m[1]] = append(byName[m[1]], b)
	}
	names := []string{
		"all", "myserver", "batch:job", "__libc_start_call_main", "main", fxOperator, "hot_a", "hot_a_inner",
		"asm_exc_page_fault_[k]", "clear_page_erms_[k]", "hot_b", "__futex_abstimed_wait_common",
		"do_futex_[k]", "futex_wait_queue_[k]", "weird:name with newline", "libfoo.so.1+0x4a10",
		"libfoo.so.1+0x4567", "crunch", "[unknown]", "[unknown]_[k]", "0xffffffff81000123_[k]",
	}
	for _, n := range names {
		if len(byName[n]) == 0 {
			t.Errorf("no box for %q", n)
		}
	}
	// The raw bytes hold the escaped form of names with XML's characters.
	if !bytes.Contains(data, []byte("operator&lt;&lt;(std::ostream&amp;, Foo const&amp;)")) {
		t.Errorf("operator<< not escaped as expected")
	}
	// Counts and percentages in titles, by hand from the fixture (of 164).
	for name, want := range map[string]string{
		"all":           "all (164 samples, 100.00%)",
		"myserver":      "myserver (142 samples, 86.59%)",
		"hot_a":         "hot_a (100 samples, 60.98%)",
		"hot_a_inner":   "hot_a_inner (100 samples, 60.98%)",
		"crunch":        "crunch (19 samples, 11.59%)",
		"[unknown]_[k]": "[unknown]_[k] (3 samples, 1.83%)",
	} {
		if bs := byName[name]; len(bs) != 1 || bs[0].title != want {
			t.Errorf("%s: boxes %v, want title %q", name, bs, want)
		}
	}
	// main appears twice: once per process.
	if len(byName["main"]) != 2 {
		t.Errorf("%d boxes for main, want 2", len(byName["main"]))
	}
	// Geometry: "all" spans the drawing width at the bottom; a child sits
	// one level above its parent, within it, with a width in proportion.
	all, ms := byName["all"][0], byName["myserver"][0]
	if all.x != svgPad || math.Abs(all.w-(svgWidth-2*svgPad)) > 0.01 {
		t.Errorf("all box at %v width %v", all.x, all.w)
	}
	if ms.y != all.y-svgFrameH || ms.x < all.x || ms.x+ms.w > all.x+all.w+0.01 {
		t.Errorf("myserver box %+v not above all %+v", ms, all)
	}
	if want := 142.0 / 164 * (svgWidth - 2*svgPad); math.Abs(ms.w-want) > 0.01 {
		t.Errorf("myserver width %v, want %v", ms.w, want)
	}
	// Alphabetical order: batch:job left of myserver.
	if bj := byName["batch:job"][0]; bj.x >= ms.x {
		t.Errorf("batch:job at %v, myserver at %v", bj.x, ms.x)
	}
	// Colours by kind: kernel boxes blue-dominant, user boxes red-dominant.
	rgb := regexp.MustCompile(`^rgb\((\d+),(\d+),(\d+)\)$`)
	for name, kernel := range map[string]bool{"do_futex_[k]": true, "clear_page_erms_[k]": true, "hot_b": false, "crunch": false} {
		m := rgb.FindStringSubmatch(byName[name][0].fill)
		if m == nil {
			t.Fatalf("%s fill %q", name, byName[name][0].fill)
		}
		r, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[3])
		if (b > r) != kernel {
			t.Errorf("%s fill %s: kernel=%v", name, byName[name][0].fill, kernel)
		}
	}
	// Labels fit: the wide box shows its whole name, the narrow ones none.
	if byName["hot_a"][0].text != "hot_a" {
		t.Errorf("hot_a label %q", byName["hot_a"][0].text)
	}
	if tb := byName["0xffffffff81000123_[k]"][0]; tb.w > 40 || tb.text == "0xffffffff81000123_[k]" {
		t.Errorf("narrow box %+v carries its full label", tb)
	}
	// The behaviour is there, inline.
	for _, fn := range []string{"function init(", "function zoom(", "function unzoom(", "function search(", "window.prompt("} {
		if !strings.Contains(script, fn) {
			t.Errorf("script lacks %q", fn)
		}
	}
	if !bytes.Contains(data, []byte("<![CDATA[")) || !bytes.Contains(data, []byte(`id="search"`)) || !bytes.Contains(data, []byte(`id="unzoom"`)) {
		t.Errorf("no CDATA script or no buttons")
	}
	for _, bad := range []string{"http://", "https://", "@import", "<script src", "xlink:href"} {
		if bytes.Contains(bytes.ReplaceAll(data, []byte("http://www.w3.org/2000/svg"), nil), []byte(bad)) {
			t.Errorf("SVG contains %q", bad)
		}
	}
}

func TestSVGPerThreadAndEmpty(t *testing.T) {
	p := fixtureProfile()
	p.PerThread = true
	boxes, _ := parseSVG(t, svgBytes(t, p))
	found := map[string]bool{}
	for _, b := range boxes {
		found[b.title[:strings.LastIndex(b.title, " (")]] = true
	}
	for _, n := range []string{"worker-1", "worker-2", "jit<&>", "batch:job"} {
		if !found[n] {
			t.Errorf("no box for thread %q", n)
		}
	}
	// An empty profile is still a valid SVG with just the "all" box gone.
	boxes, _ = parseSVG(t, svgBytes(t, &Profile{FreqHz: 99}))
	if len(boxes) != 0 {
		t.Errorf("%d boxes in an empty profile", len(boxes))
	}
}

// Boxes narrower than svgMinWidth are left out with their children; the
// rest are all there.
func TestSVGPrunesNarrowBoxes(t *testing.T) {
	p := fixtureProfile()
	p.Samples[1].Count = 1e6 // hot_a_inner: everything else is under 0.1px... almost
	boxes, _ := parseSVG(t, svgBytes(t, p))
	for _, b := range boxes {
		if b.w < svgMinWidth {
			t.Errorf("box %q is %vpx wide", b.title, b.w)
		}
	}
	var titles []string
	for _, b := range boxes {
		titles = append(titles, b.title)
	}
	joined := strings.Join(titles, "\n")
	// 60 of ~1e6 samples is 0.07px: pruned; hot_b's 27 too.
	if strings.Contains(joined, "clear_page_erms") || strings.Contains(joined, "hot_b") {
		t.Errorf("narrow boxes drawn:\n%s", joined)
	}
	if !strings.Contains(joined, "hot_a_inner (1000060 samples") {
		t.Errorf("wide box missing:\n%s", joined)
	}
}

// xmlTree is an SVG element as the script harness reads it.
type xmlTree struct {
	T string            `json:"t"`
	A map[string]string `json:"a,omitempty"`
	C []any             `json:"c,omitempty"`
}

func svgTree(t *testing.T, data []byte) *xmlTree {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var stack []*xmlTree
	var root *xmlTree
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			n := &xmlTree{T: el.Name.Local, A: map[string]string{}}
			for _, a := range el.Attr {
				n.A[a.Name.Local] = a.Value
			}
			if len(stack) > 0 {
				p := stack[len(stack)-1]
				p.C = append(p.C, n)
			} else {
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				p := stack[len(stack)-1]
				p.C = append(p.C, string(el))
			}
		}
	}
	return root
}

type harnessBox struct {
	Title, Fill, Label string
	X, W               float64
	Hide, Parent       bool
}

type harnessStep struct {
	Step         string
	Boxes        []harnessBox
	Matched      string
	Details      string
	UnzoomHidden bool
	SearchLabel  string
}

// The script's behaviour, run by node against a minimal DOM built from the
// SVG: zoom into hot_a, reset, search, reset, Escape, a bad search.
func TestSVGScript(t *testing.T) {
	node := testutil.Need(t, "node")
	data := svgBytes(t, fixtureProfile())
	tree, err := json.Marshal(svgTree(t, data))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tree.json")
	if err := os.WriteFile(path, tree, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join("testdata", "svg_harness.js"), path, "hot_a", "^hot_a", "myserver")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var res struct {
		Steps  []harnessStep
		Alerts []string
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("harness output: %v\n%s", err, out)
	}
	steps := map[string]*harnessStep{}
	for i := range res.Steps {
		steps[res.Steps[i].Step] = &res.Steps[i]
	}
	box := func(st *harnessStep, prefix string) harnessBox {
		t.Helper()
		var found []harnessBox
		for _, b := range st.Boxes {
			if strings.HasPrefix(b.Title, prefix+" (") {
				found = append(found, b)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%s: %d boxes named %q", st.Step, len(found), prefix)
		}
		return found[0]
	}
	const full = svgWidth - 2*svgPad
	init := steps["initial"]
	if init.Details != " " || !init.UnzoomHidden || init.SearchLabel != "Search" || init.Matched != " " {
		t.Errorf("initial state %+v", init)
	}
	if d := steps["hover"].Details; d != "hot_a (100 samples, 60.98%)" {
		t.Errorf("details on hover %q", d)
	}

	// Zoom: hot_a fills the width; its child too (same samples); the
	// kernel frames above it get 60 of its 100 samples; what it sits on is
	// shown faded at full width; everything else is hidden.
	z := steps["zoom"]
	if z.UnzoomHidden {
		t.Errorf("reset zoom button hidden after zoom")
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 0.05 }
	hot0 := box(init, "hot_a")
	for _, n := range []string{"hot_a", "hot_a_inner"} {
		if b := box(z, n); b.Hide || b.Parent || !near(b.X, svgPad) || !near(b.W, full) || b.Label != n {
			t.Errorf("zoomed %s: %+v", n, b)
		}
	}
	pf := box(z, "asm_exc_page_fault_[k]")
	pf0 := box(init, "asm_exc_page_fault_[k]")
	scale := full / hot0.W
	if pf.Hide || !near(pf.W, 0.6*full) || !near(pf.X, svgPad+(pf0.X-hot0.X)*scale) || pf.Label != "asm_exc_page_fault_[k]" {
		t.Errorf("zoomed child %+v (was %+v)", pf, pf0)
	}
	if pf0.Label == pf.Label && pf0.W < 100 {
		t.Errorf("label did not grow with its box")
	}
	for _, n := range []string{"all", "myserver", fxOperator} {
		if b := box(z, n); b.Hide || !b.Parent || !near(b.X, svgPad) || !near(b.W, full) {
			t.Errorf("zoomed ancestor %s: %+v", n, b)
		}
	}
	for _, n := range []string{"batch:job", "crunch", "hot_b", "weird:name with newline", "do_futex_[k]"} {
		if b := box(z, n); !b.Hide {
			t.Errorf("zoomed: %s not hidden: %+v", n, b)
		}
	}
	// Zoom into myserver (142 samples): hot_b (27) comes after
	// __futex_abstimed_wait_common (10), scaled by 164/142.
	z2 := steps["zoom2"]
	if hb := box(z2, "hot_b"); hb.Hide || !near(hb.X, svgPad+10.0/142*full) || !near(hb.W, 27.0/142*full) {
		t.Errorf("zoom into myserver: hot_b %+v", hb)
	}
	if bj := box(z2, "batch:job"); !bj.Hide {
		t.Errorf("zoom into myserver: batch:job shown")
	}
	// Reset: everything back where it was.
	for _, step := range []string{"unzoom", "escape"} {
		st := steps[step]
		if !st.UnzoomHidden {
			t.Errorf("%s: reset button still shown", step)
		}
		for i, b := range st.Boxes {
			if b != init.Boxes[i] {
				t.Errorf("%s: box %q is %+v, was %+v", step, b.Title, b, init.Boxes[i])
			}
		}
	}
	// Search ^hot_a: hot_a and hot_a_inner (nested: their 100 samples
	// count once) of 164: 61.0%.
	s := steps["search"]
	if s.Matched != "Matched: 61.0% (^hot_a)" || s.SearchLabel != "Reset Search" {
		t.Errorf("search: matched %q, label %q", s.Matched, s.SearchLabel)
	}
	for i, b := range s.Boxes {
		hit := strings.HasPrefix(b.Title, "hot_a")
		if hit != (b.Fill == "rgb(230,0,230)") || (!hit && b.Fill != init.Boxes[i].Fill) {
			t.Errorf("search: box %q fill %s", b.Title, b.Fill)
		}
	}
	r := steps["reset search"]
	if r.Matched != " " || r.SearchLabel != "Search" {
		t.Errorf("reset search: %q %q", r.Matched, r.SearchLabel)
	}
	for i, b := range r.Boxes {
		if b.Fill != init.Boxes[i].Fill {
			t.Errorf("reset search: %q fill %s", b.Title, b.Fill)
		}
	}
	if len(res.Alerts) != 1 || !strings.Contains(res.Alerts[0], "Bad regular expression") || steps["bad search"].Matched != " " {
		t.Errorf("bad search: alerts %q, matched %q", res.Alerts, steps["bad search"].Matched)
	}
}
