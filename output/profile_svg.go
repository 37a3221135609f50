package output

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Flame-graph geometry, in SVG user units (pixels).
const (
	svgWidth    = 1200.0
	svgPad      = 10.0  // left and right margins
	svgFrameH   = 16.0  // height of one level
	svgFontSize = 12.0  // label font size
	svgTop      = 36.0  // room for the title and buttons
	svgBottom   = 34.0  // room for the details line
	svgMinWidth = 0.1   // boxes narrower than this are not drawn (nor their children)
	svgCharW    = 0.59  // average glyph width as a fraction of the font size
	svgMaxDepth = 10000 // bound on levels drawn, whatever the input
)

// flameNode is one box of the flame graph: a frame name at a depth under
// one parent, with the samples of every stack that passes through it.
type flameNode struct {
	name     string
	kind     frameKind
	count    int64
	children []*flameNode
	byName   map[string]*flameNode
}

func (n *flameNode) child(name string, kind frameKind) *flameNode {
	// Most nodes have a few children: scan them; index the rest.
	if n.byName != nil {
		if c := n.byName[name]; c != nil {
			return c
		}
	} else {
		for _, c := range n.children {
			if c.name == name {
				return c
			}
		}
	}
	c := &flameNode{name: name, kind: kind}
	n.children = append(n.children, c)
	if n.byName != nil {
		n.byName[name] = c
	} else if len(n.children) > 8 {
		n.byName = make(map[string]*flameNode, 2*len(n.children))
		for _, cc := range n.children {
			n.byName[cc.name] = cc
		}
	}
	return c
}

// flameTree merges folded stacks into a tree under an "all" root and sorts
// every node's children by name (the flame-graph convention: the x axis is
// alphabetical, not time).
func flameTree(stacks []foldedStack) (*flameNode, int) {
	root := &flameNode{name: "all", kind: kindRoot}
	depth := 1
	for _, st := range stacks {
		n := root
		n.count += st.count
		for i, name := range st.names {
			n = n.child(name, st.kinds[i])
			n.count += st.count
		}
		depth = max(depth, len(st.names)+1)
	}
	var sortAll func(n *flameNode)
	sortAll = func(n *flameNode) {
		sort.Slice(n.children, func(i, j int) bool { return n.children[i].name < n.children[j].name })
		n.byName = nil
		for _, c := range n.children {
			sortAll(c)
		}
	}
	sortAll(root)
	return root, min(depth, svgMaxDepth)
}

// WriteSVG writes p as a self-contained interactive flame graph: one box per
// frame (root at the bottom, the same frame names as folded stacks under an
// "all" box), width proportional to samples, coloured by kind (user, inlined,
// kernel, unknown, process/thread) with hues hashed from the name. Each box
// has a tooltip (name, samples, percentage); clicking a box zooms into it,
// "Reset Zoom" (or Escape) goes back; "Search" (or Ctrl-F) asks for a regular
// expression, highlights matching boxes and shows the share of samples they
// cover. Everything is inline: one <script> in CDATA, no external script,
// font or network access. Boxes narrower than 0.1 pixel at full width are
// left out, with their children, as flamegraph.pl does.
func WriteSVG(w io.Writer, p *Profile) error {
	stacks := foldStacks(p)
	root, depth := flameTree(stacks)
	height := svgTop + float64(depth)*svgFrameH + svgBottom

	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" onload="init(evt)">
`, svgNum(svgWidth), svgNum(height), svgNum(svgWidth), svgNum(height))
	bw.WriteString(`<style type="text/css"><![CDATA[
text { font-family: monospace; font-size: 12px; fill: #000; }
#title { font-size: 17px; text-anchor: middle; }
.btn { cursor: pointer; }
.btn rect { fill: #ddd; stroke: #999; }
.btn:hover rect { fill: #ccc; }
.hide { display: none; }
#frames g { cursor: pointer; }
#frames g:hover rect { stroke: #000; stroke-width: 0.5; }
#frames text { pointer-events: none; }
.parent rect { opacity: 0.5; }
]]></style>
`)
	fmt.Fprintf(bw, "<script type=\"text/ecmascript\"><![CDATA[\n\"use strict\";\nvar fgWidth = %s, fgPad = %s, fgCharW = %s;\n%s]]></script>\n",
		svgNum(svgWidth), svgNum(svgPad), svgNum(svgFontSize*svgCharW), svgScript)
	fmt.Fprintf(bw, `<rect x="0" y="0" width="%s" height="%s" fill="#f8f8f0"/>`+"\n", svgNum(svgWidth), svgNum(height))
	fmt.Fprintf(bw, `<text id="title" x="%s" y="24">%s</text>`+"\n", svgNum(svgWidth/2), xmlEscape(svgTitle(p, root.count)))
	bw.WriteString(`<g id="unzoom" class="btn hide"><rect x="10" y="8" width="96" height="20" rx="3"/><text x="16" y="22">Reset Zoom</text></g>` + "\n")
	fmt.Fprintf(bw, `<g id="search" class="btn"><rect x="%s" y="8" width="110" height="20" rx="3"/><text id="searchlabel" x="%s" y="22">Search</text></g>`+"\n",
		svgNum(svgWidth-svgPad-110), svgNum(svgWidth-svgPad-104))
	fmt.Fprintf(bw, `<text id="details" x="%s" y="%s"> </text>`+"\n", svgNum(svgPad), svgNum(height-12))
	fmt.Fprintf(bw, `<text id="matched" x="%s" y="%s" text-anchor="end"> </text>`+"\n", svgNum(svgWidth-svgPad), svgNum(height-12))

	bw.WriteString(`<g id="frames">` + "\n")
	fw := &flameWriter{w: bw, total: root.count, height: height, scale: 0}
	if root.count > 0 {
		fw.scale = (svgWidth - 2*svgPad) / float64(root.count)
	}
	fw.node(root, svgPad, 0)
	bw.WriteString("</g>\n</svg>\n")
	return bw.Flush()
}

func svgTitle(p *Profile, total int64) string {
	var comms []string
	for _, pr := range p.Processes {
		comms = append(comms, fmt.Sprintf("%s (%d)", pr.Comm, pr.PID))
	}
	t := "Flame graph"
	if len(comms) > 0 {
		t += ": " + strings.Join(comms, ", ")
	}
	t += fmt.Sprintf(" · %d samples", total)
	if p.Duration > 0 {
		t += " in " + p.Duration.Round(time.Millisecond).String()
	}
	if p.FreqHz > 0 {
		t += fmt.Sprintf(" at %d Hz", p.FreqHz)
	}
	return t
}

type flameWriter struct {
	w      *bufio.Writer
	total  int64
	height float64
	scale  float64
	num    []byte
}

// node writes n's box at x and depth d, then its children left to right.
// The recursion is bounded by svgMaxDepth.
func (fw *flameWriter) node(n *flameNode, x float64, d int) {
	width := float64(n.count) * fw.scale
	if width < svgMinWidth || d >= svgMaxDepth {
		return
	}
	y := fw.height - svgBottom - float64(d+1)*svgFrameH
	w := fw.w
	name := sanitizeName(n.name)
	w.WriteString("<g><title>")
	xmlReplacer.WriteString(w, name)
	w.WriteString(" (")
	fw.num = strconv.AppendInt(fw.num[:0], n.count, 10)
	w.Write(fw.num)
	if n.count == 1 {
		w.WriteString(" sample, ")
	} else {
		w.WriteString(" samples, ")
	}
	fw.num = strconv.AppendFloat(fw.num[:0], pct(n.count, fw.total), 'f', 2, 64)
	w.Write(fw.num)
	w.WriteString("%)</title><rect x=\"")
	fw.writeNum(x)
	w.WriteString("\" y=\"")
	fw.writeNum(y)
	w.WriteString("\" width=\"")
	fw.writeNum(width)
	w.WriteString("\" height=\"")
	fw.writeNum(svgFrameH - 1)
	w.WriteString("\" fill=\"")
	w.WriteString(flameColor(n.name, n.kind))
	w.WriteString("\" rx=\"2\"/><text x=\"")
	fw.writeNum(x + 3)
	w.WriteString("\" y=\"")
	fw.writeNum(y + svgFrameH - 4.5)
	w.WriteString("\">")
	xmlReplacer.WriteString(w, fitLabel(name, width))
	w.WriteString("</text></g>\n")
	for _, c := range n.children {
		fw.node(c, x, d+1)
		x += float64(c.count) * fw.scale
	}
}

// fitLabel shortens name to what fits in a box width pixels wide, as the
// script does after zooming.
func fitLabel(name string, width float64) string {
	chars := int((width - 6) / (svgFontSize * svgCharW))
	if chars < 3 {
		return ""
	}
	if len(name) <= chars || utf8.RuneCountInString(name) <= chars {
		return name
	}
	r := []rune(name)
	return string(r[:chars-2]) + ".."
}

// writeNum writes v with at most two decimals, without trailing zeros.
func (fw *flameWriter) writeNum(v float64) {
	b := strconv.AppendFloat(fw.num[:0], v, 'f', 2, 64)
	for len(b) > 0 && b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	if len(b) > 0 && b[len(b)-1] == '.' {
		b = b[:len(b)-1]
	}
	fw.num = b
	fw.w.Write(b)
}

func svgNum(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

var xmlReplacer = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

// xmlEscape escapes s for XML text and attributes. Names reaching here went
// through sanitizeName, so they hold no characters XML forbids; others are
// sanitized here.
func xmlEscape(s string) string {
	return xmlReplacer.Replace(sanitizeName(s))
}

// flameColor picks a fill for a box: the kind chooses the palette, a hash
// of the name the shade, so a function keeps its colour across graphs.
func flameColor(name string, kind frameKind) string {
	// FNV-1a, inline: no allocation per box.
	v := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		v ^= uint32(name[i])
		v *= 16777619
	}
	a := float64(v&0xff) / 255
	b := float64((v>>8)&0xff) / 255
	c := float64((v>>16)&0xff) / 255
	var r, g, bl float64
	switch kind {
	case kindUser: // reds, oranges, yellows
		r, g, bl = 205+50*a, 50+170*b, 20+40*c
	case kindInlined: // aquas
		r, g, bl = 60+60*a, 180+55*b, 180+55*c
	case kindKernel: // blues
		r, g, bl = 90+50*a, 130+50*b, 210+45*c
	case kindUnknown: // greys
		r = 165 + 50*a
		g, bl = r, r+10
	default: // process and thread roots: lilacs
		r, g, bl = 175+30*a, 150+30*b, 205+40*c
	}
	return "rgb(" + strconv.Itoa(int(r)) + "," + strconv.Itoa(int(g)) + "," + strconv.Itoa(min(int(bl), 255)) + ")"
}

// svgScript is the flame graph's behaviour: tooltips come from <title>; this
// adds the details line, zoom on click, reset, and search.
const svgScript = `var fgFrames, details, matchedText, unzoomBtn, searchLabel, boxes = [];
var zoomed = null, searching = null;
function init(evt) {
	fgFrames = document.getElementById("frames");
	details = document.getElementById("details").firstChild;
	matchedText = document.getElementById("matched").firstChild;
	unzoomBtn = document.getElementById("unzoom");
	searchLabel = document.getElementById("searchlabel").firstChild;
	var gs = fgFrames.getElementsByTagName("g");
	for (var i = 0; i < gs.length; i++) {
		var g = gs[i], r = g.getElementsByTagName("rect")[0];
		var t = g.getElementsByTagName("title")[0].firstChild.nodeValue;
		var cut = t.lastIndexOf(" (");
		g.fg = {x: +r.getAttribute("x"), w: +r.getAttribute("width"), y: +r.getAttribute("y"),
			name: t.substring(0, cut), info: t, fill: r.getAttribute("fill"),
			rect: r, text: g.getElementsByTagName("text")[0]};
		boxes.push(g);
	}
	fgFrames.addEventListener("click", function (e) {
		var g = box(e.target);
		if (g) zoom(g);
	});
	fgFrames.addEventListener("mouseover", function (e) {
		var g = box(e.target);
		if (g) details.nodeValue = g.fg.info;
	});
	fgFrames.addEventListener("mouseout", function (e) { details.nodeValue = " "; });
	unzoomBtn.addEventListener("click", unzoom);
	document.getElementById("search").addEventListener("click", function () {
		if (searching) resetSearch(); else askSearch();
	});
	window.addEventListener("keydown", function (e) {
		if ((e.ctrlKey || e.metaKey) && e.key === "f") { e.preventDefault(); askSearch(); }
		else if (e.key === "Escape") { unzoom(); resetSearch(); }
	});
}
function box(el) {
	while (el && el.parentNode !== fgFrames) el = el.parentNode;
	return el && el.fg ? el : null;
}
function label(g, w) {
	var n = Math.floor((w - 6) / fgCharW), name = g.fg.name;
	if (n < 3) return "";
	return name.length <= n ? name : name.substring(0, n - 2) + "..";
}
function place(g, x, w) {
	g.fg.rect.setAttribute("x", x);
	g.fg.rect.setAttribute("width", w);
	g.fg.text.setAttribute("x", x + 3);
	var t = g.fg.text;
	if (t.firstChild) t.firstChild.nodeValue = label(g, w);
	else t.appendChild(document.createTextNode(label(g, w)));
}
function zoom(z) {
	var zx = z.fg.x, zw = z.fg.w, zy = z.fg.y, eps = 0.0001;
	var scale = (fgWidth - 2 * fgPad) / zw;
	zoomed = z;
	unzoomBtn.classList.remove("hide");
	for (var i = 0; i < boxes.length; i++) {
		var g = boxes[i], f = g.fg;
		g.classList.remove("hide");
		g.classList.remove("parent");
		if (f.y > zy) {
			// Below: an ancestor if it covers the zoomed box.
			if (f.x <= zx + eps && f.x + f.w >= zx + zw - eps) {
				g.classList.add("parent");
				place(g, fgPad, fgWidth - 2 * fgPad);
			} else {
				g.classList.add("hide");
			}
		} else if (f.x >= zx - eps && f.x + f.w <= zx + zw + eps) {
			place(g, fgPad + (f.x - zx) * scale, f.w * scale);
		} else {
			g.classList.add("hide");
		}
	}
}
function unzoom() {
	if (!zoomed) return;
	zoomed = null;
	unzoomBtn.classList.add("hide");
	for (var i = 0; i < boxes.length; i++) {
		var g = boxes[i];
		g.classList.remove("hide");
		g.classList.remove("parent");
		place(g, g.fg.x, g.fg.w);
	}
}
function askSearch() {
	var term = window.prompt("Search for (regular expression):", searching || "");
	if (term) search(term);
}
function search(term) {
	var re;
	try { re = new RegExp(term); } catch (e) { window.alert("Bad regular expression: " + e.message); return; }
	searching = term;
	var spans = [];
	for (var i = 0; i < boxes.length; i++) {
		var f = boxes[i].fg;
		if (re.test(f.name)) {
			f.rect.setAttribute("fill", "rgb(230,0,230)");
			spans.push([f.x, f.x + f.w]);
		} else {
			f.rect.setAttribute("fill", f.fill);
		}
	}
	// Nested matches cover the same samples: merge overlapping spans.
	spans.sort(function (a, b) { return a[0] - b[0]; });
	var covered = 0, end = -1;
	for (var j = 0; j < spans.length; j++) {
		var s = spans[j][0], e = spans[j][1];
		if (s < end) s = end;
		if (e > s) { covered += e - s; end = e; }
	}
	var pct = 100 * covered / (fgWidth - 2 * fgPad);
	matchedText.nodeValue = "Matched: " + pct.toFixed(1) + "% (" + term + ")";
	searchLabel.nodeValue = "Reset Search";
}
function resetSearch() {
	if (!searching) return;
	searching = null;
	for (var i = 0; i < boxes.length; i++) boxes[i].fg.rect.setAttribute("fill", boxes[i].fg.fill);
	matchedText.nodeValue = " ";
	searchLabel.nodeValue = "Search";
}
`
