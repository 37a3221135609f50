package output

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
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
