// Runs the flame graph's inline script against a minimal DOM, for
// TestSVGScript in profile_svg_test.go.
//
// Usage: node svg_harness.js TREE.json ZOOM SEARCH ZOOM2
//
// TREE.json is the SVG's element tree as the Go test decoded it with
// encoding/xml: {"t": tag, "a": {attr: value}, "c": [child...]}, text as
// plain strings. The harness builds DOM-like objects (only what the script
// uses), runs the script, plays a scenario (zoom, reset, search, reset,
// Escape) and prints the state of every box after each step as JSON.
"use strict";
const fs = require("fs");

class Text {
	constructor(v) { this.nodeValue = v; this.parentNode = null; this.nodeName = "#text"; }
}

class Element {
	constructor(tag, attrs) {
		this.nodeName = tag;
		this.attrs = Object.assign({}, attrs);
		this.childNodes = [];
		this.parentNode = null;
		this.listeners = {};
		const el = this;
		this.classList = {
			list() { return (el.attrs["class"] || "").split(/\s+/).filter(Boolean); },
			add(c) { const l = this.list(); if (!l.includes(c)) l.push(c); el.attrs["class"] = l.join(" "); },
			remove(c) { el.attrs["class"] = this.list().filter(x => x !== c).join(" "); },
			contains(c) { return this.list().includes(c); },
		};
	}
	get firstChild() { return this.childNodes[0] || null; }
	getAttribute(n) { return n in this.attrs ? this.attrs[n] : null; }
	setAttribute(n, v) { this.attrs[n] = String(v); }
	appendChild(n) { n.parentNode = this; this.childNodes.push(n); return n; }
	addEventListener(type, fn) { (this.listeners[type] = this.listeners[type] || []).push(fn); }
	getElementsByTagName(tag) {
		const out = [];
		const walk = (n) => {
			for (const c of n.childNodes) {
				if (c instanceof Element) {
					if (c.nodeName === tag) out.push(c);
					walk(c);
				}
			}
		};
		walk(this);
		return out;
	}
	fire(type, ev) { for (const fn of this.listeners[type] || []) fn(ev); }
}

function build(j) {
	if (typeof j === "string") return new Text(j);
	const el = new Element(j.t, j.a || {});
	for (const c of j.c || []) el.appendChild(build(c));
	return el;
}

const tree = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const root = build(tree);
const byId = (id) => {
	let found = null;
	const walk = (n) => {
		if (found || !(n instanceof Element)) return;
		if (n.attrs.id === id) { found = n; return; }
		n.childNodes.forEach(walk);
	};
	walk(root);
	return found;
};
const document = {
	documentElement: root,
	getElementById: byId,
	createTextNode: (s) => new Text(s),
};
let answer = null;
const alerts = [];
const winListeners = {};
const window = {
	prompt: () => answer,
	alert: (m) => alerts.push(m),
	addEventListener: (type, fn) => { (winListeners[type] = winListeners[type] || []).push(fn); },
};

const script = root.getElementsByTagName("script").map(s => s.childNodes.map(t => t.nodeValue).join("")).join("\n");
const api = new Function("document", "window", script + "\nreturn {init: init};")(document, window);
api.init({});

const frames = byId("frames");
const boxes = frames.childNodes.filter(n => n instanceof Element && n.nodeName === "g");
const titleOf = (g) => g.getElementsByTagName("title")[0].firstChild.nodeValue;
function state() {
	return boxes.map(g => {
		const r = g.getElementsByTagName("rect")[0];
		const t = g.getElementsByTagName("text")[0];
		return {
			title: titleOf(g),
			x: +r.getAttribute("x"),
			w: +r.getAttribute("width"),
			fill: r.getAttribute("fill"),
			hide: g.classList.contains("hide"),
			parent: g.classList.contains("parent"),
			label: t.firstChild ? t.firstChild.nodeValue : "",
		};
	});
}
const text = (id) => byId(id).firstChild.nodeValue;
const steps = [];
const snap = (name) => steps.push({
	step: name, boxes: state(), matched: text("matched"), details: text("details"),
	unzoomHidden: byId("unzoom").classList.contains("hide"),
	searchLabel: text("searchlabel"),
});

snap("initial");
const target = boxes.find(g => titleOf(g).startsWith(process.argv[3] + " ("));
if (!target) throw new Error("no box " + process.argv[3]);
frames.fire("mouseover", { target: target.getElementsByTagName("rect")[0] });
snap("hover");
frames.fire("click", { target: target.getElementsByTagName("rect")[0] });
snap("zoom");
byId("unzoom").fire("click", {});
snap("unzoom");
answer = process.argv[4];
byId("search").fire("click", {});
snap("search");
byId("search").fire("click", {});
snap("reset search");
frames.fire("click", { target: target.getElementsByTagName("text")[0] });
for (const fn of winListeners.keydown || []) fn({ key: "Escape", preventDefault() {} });
snap("escape");
const second = boxes.find(g => titleOf(g).startsWith(process.argv[5] + " ("));
if (!second) throw new Error("no box " + process.argv[5]);
frames.fire("click", { target: second });
snap("zoom2");
byId("unzoom").fire("click", {});
answer = "([";
byId("search").fire("click", {});
snap("bad search");
console.log(JSON.stringify({ steps, alerts }));
