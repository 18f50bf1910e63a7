/* SPDX-License-Identifier: MIT */
/*
 * profctl-flame-svg.c - `profctl flame`'s SVG: one self-contained file, no
 * network, viewable in any browser.
 *
 * Layout: the root ("all") at the bottom, one row per depth, each node a
 * <g class="f"> holding a <title> (its name, a newline, its time and share:
 * the browser's tooltip and the script's source of the name), a <rect>
 * whose x and width are its place and weight in the root's width, and a
 * <text> label cut to what fits (monospace, so the cut is computed here
 * and again by the script after a zoom with the same rule). data-x and
 * data-v carry the node's start and weight in ps, data-d its depth: the
 * script zooms and sums search matches from those, not from rounded
 * pixels. Nodes narrower than MIN_PX are left out (with everything above
 * them, which is narrower still), which bounds the file by the width, not
 * by the tree.
 *
 * The script (inline, CDATA) is ours: click zooms into a node (its
 * ancestors span the width, dimmed; what is not under it hides), "Reset
 * Zoom" or Escape goes back; "Search" or Ctrl-F asks for a regular
 * expression, paints matching nodes magenta and prints the share of the
 * total they cover (a match inside a match is counted once); hovering
 * prints a node's name, time and share at the bottom.
 *
 * The output depends only on the tree: children come in name order and
 * colours from a hash of the name.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/hash.h"
#include "profctl-flame.h"

#define SVG_W 1200
#define SVG_PAD 10    /* left and right margin */
#define FRAME_H 16    /* row height; rects are one less */
#define TOP_H 56      /* title, subtitle, controls */
#define BOTTOM_H 30   /* the details line */
#define MIN_PX 0.1
#define CHAR_W 7.2    /* 12px monospace advance */

static const char script[] =
	"'use strict';\n"
	/* W, PAD and CHAR_W are SVG_W, SVG_PAD and CHAR_W */
	"var W = 1200, PAD = 10, CHAR_W = 7.2, frames = [], root, zoomed, term = null;\n"
	"var details, matched, resetBtn;\n"
	"function label(f, w) {\n"
	"  var n = Math.floor((w - 6) / CHAR_W), cs = Array.from(f.name);\n"
	"  if (n < 3) return '';\n"
	"  return cs.length <= n ? f.name : cs.slice(0, n - 2).join('') + '..';\n"
	"}\n"
	"function place(f, x, w) {\n"
	"  f.rect.setAttribute('x', x.toFixed(2));\n"
	"  f.rect.setAttribute('width', w.toFixed(2));\n"
	"  f.text.setAttribute('x', (x + 3).toFixed(2));\n"
	"  f.text.textContent = label(f, w);\n"
	"}\n"
	"function zoom(z) {\n"
	"  var span = W - 2 * PAD, zv = z.v > 0 ? z.v : 1;\n"
	"  zoomed = z;\n"
	"  frames.forEach(function (f) {\n"
	"    var inside = f.d >= z.d && f.x >= z.x && f.x + f.v <= z.x + z.v;\n"
	"    var anc = f.d < z.d && f.x <= z.x && f.x + f.v >= z.x + z.v;\n"
	"    f.g.classList.toggle('hide', !inside && !anc);\n"
	"    f.g.classList.toggle('anc', anc);\n"
	"    if (anc) place(f, PAD, span);\n"
	"    else if (inside) place(f, PAD + (f.x - z.x) / zv * span, f.v / zv * span);\n"
	"  });\n"
	"  resetBtn.classList.toggle('hide', z === root);\n"
	"}\n"
	"function reset() { zoom(root); }\n"
	"function search(t) {\n"
	"  var re = null, hits = [], sum = 0, end = -1;\n"
	"  term = t ? String(t) : null;\n"
	"  if (term) { try { re = new RegExp(term); } catch (e) { re = null; } }\n"
	"  frames.forEach(function (f) {\n"
	"    var m = !!term && (re ? re.test(f.name) : f.name.indexOf(term) >= 0);\n"
	"    f.g.classList.toggle('hit', m);\n"
	"    f.rect.setAttribute('fill', m ? 'rgb(230,0,230)' : f.fill);\n"
	"    if (m) hits.push(f);\n"
	"  });\n"
	"  hits.sort(function (a, b) { return a.x - b.x || a.d - b.d; });\n"
	"  hits.forEach(function (f) { if (f.x >= end) { sum += f.v; end = f.x + f.v; } });\n"
	"  matched.textContent = term ? 'Matched: ' + (root.v > 0 ? 100 * sum / root.v : 0).toFixed(2) + '%' : '';\n"
	"  document.getElementById('search').textContent = term ? 'Clear search' : 'Search';\n"
	"  return root.v > 0 ? sum / root.v : 0;\n"
	"}\n"
	"function ask() {\n"
	"  if (term) { search(null); return; }\n"
	"  var t = window.prompt('Search for (regular expression):', '');\n"
	"  if (t) search(t);\n"
	"}\n"
	"function init() {\n"
	"  details = document.getElementById('details');\n"
	"  matched = document.getElementById('matched');\n"
	"  resetBtn = document.getElementById('reset');\n"
	"  var gs = document.querySelectorAll('g.f');\n"
	"  for (var i = 0; i < gs.length; i++) {\n"
	"    var g = gs[i], t = g.querySelector('title').textContent.split('\\n');\n"
	"    var f = { g: g, rect: g.querySelector('rect'), text: g.querySelector('text'), name: t[0], info: t[1] || '',\n"
	"              x: +g.getAttribute('data-x'), v: +g.getAttribute('data-v'), d: +g.getAttribute('data-d') };\n"
	"    f.fill = f.rect.getAttribute('fill');\n"
	"    frames.push(f);\n"
	"    g.addEventListener('click', zoom.bind(null, f));\n"
	"    g.addEventListener('mouseover', function () { details.textContent = this.name + '  ' + this.info; }.bind(f));\n"
	"    g.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
	"  }\n"
	"  root = zoomed = frames[0];\n"
	"  resetBtn.addEventListener('click', reset);\n"
	"  document.getElementById('search').addEventListener('click', ask);\n"
	"  window.addEventListener('keydown', function (e) {\n"
	"    if (e.key === 'Escape') reset();\n"
	"    if ((e.ctrlKey || e.metaKey) && e.key === 'f') { e.preventDefault(); ask(); }\n"
	"  });\n"
	"  window.flame = { zoom: zoom, reset: reset, search: search, frames: frames };\n"
	"}\n"
	"window.addEventListener('load', init);\n";

static void fill_of(const struct flame *fl, uint32_t i, char *buf, size_t size)
{
	size_t len;
	const char *s = flame_name(fl, i, &len);
	uint64_t h = hash_bytes64(s, len);
	unsigned a = (unsigned)(h & 0xff), b = (unsigned)(h >> 8 & 0xff), c = (unsigned)(h >> 16 & 0xff);

	switch (fl->n[i].kind) {
	case FK_ROOT: snprintf(buf, size, "rgb(200,200,200)"); break;
	case FK_NOSTACK: snprintf(buf, size, "rgb(%u,%u,%u)", 170 + a % 30, 170 + a % 30, 170 + a % 30); break;
	case FK_LEAF: snprintf(buf, size, "rgb(%u,%u,%u)", 60 + a % 70, 150 + b % 60, 210 + c % 45); break;
	default: snprintf(buf, size, "rgb(%u,%u,%u)", 205 + a % 50, b * 230 / 255, c * 55 / 255);
	}
}

/* The label that fits @w px: the whole name, its first characters and
 * "..", or nothing (the script's label() is the same rule). */
static void put_label(struct ow *w, const char *s, size_t len, double width)
{
	double fit = floor((width - 6) / CHAR_W);
	size_t chars = 0, n, cut = 0;

	if (fit < 3)
		return;
	n = (size_t)fit;
	for (size_t i = 0; i < len; i++) {
		if (((unsigned char)s[i] & 0xc0) == 0x80)
			continue;
		if (chars == n - 2)
			cut = i;
		chars++;
	}
	if (chars <= n) {
		xml_escape(w, s, len);
	} else {
		xml_escape(w, s, cut);
		ow_puts(w, "..");
	}
}

struct svg_ctx {
	struct ow *w;
	const struct flame *fl;
	double scale; /* px per ps */
	uint32_t max_depth;
};

/* The deepest node wide enough to draw: the SVG's height. */
static void measure(struct svg_ctx *c, uint32_t i)
{
	if ((double)c->fl->n[i].total_ps * c->scale < MIN_PX && i)
		return;
	if (c->fl->n[i].depth > c->max_depth)
		c->max_depth = c->fl->n[i].depth;
	for (uint32_t k = c->fl->n[i].child; k; k = c->fl->n[k].sibling)
		measure(c, k);
}

static void draw(struct svg_ctx *c, uint32_t i, uint64_t start)
{
	const struct flame_node *n = &c->fl->n[i];
	double x = SVG_PAD + (double)start * c->scale, wd = (double)n->total_ps * c->scale;
	double y = TOP_H + (double)(c->max_depth - n->depth) * FRAME_H;
	double root = (double)c->fl->n[0].total_ps;
	struct ow *w = c->w;
	char fill[32], t[32];
	size_t len;
	const char *s = flame_name(c->fl, i, &len);

	if (!i)
		wd = SVG_W - 2 * SVG_PAD; /* also when there is no weight at all */
	else if (wd < MIN_PX)
		return;
	fill_of(c->fl, i, fill, sizeof(fill));
	ow_puts(w, "<g class=\"f\" data-x=\"");
	ow_u64(w, start);
	ow_puts(w, "\" data-v=\"");
	ow_u64(w, n->total_ps);
	ow_puts(w, "\" data-d=\"");
	ow_u64(w, n->depth);
	ow_puts(w, "\"><title>");
	xml_escape(w, s, len);
	ow_printf(w, "\n%s (%.2f%%)</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" fill=\"%s\" rx=\"2\"/>"
		  "<text x=\"%.2f\" y=\"%.1f\">",
		  fmt_ps((double)n->total_ps, t, sizeof(t)), root > 0 ? 100.0 * (double)n->total_ps / root : 0.0, x, y, wd,
		  FRAME_H - 1, fill, x + 3, y + 11.5);
	put_label(w, s, len, wd);
	ow_puts(w, "</text></g>\n");
	for (uint32_t k = n->child; k; k = c->fl->n[k].sibling) {
		draw(c, k, start);
		start = start + c->fl->n[k].total_ps < start ? UINT64_MAX : start + c->fl->n[k].total_ps;
	}
}

void flame_write_svg(struct ow *w, const struct flame *fl, const char *title, const char *subtitle)
{
	struct svg_ctx c = {.w = w, .fl = fl};
	double root = (double)fl->n[0].total_ps;
	int h;

	c.scale = root > 0 ? (SVG_W - 2 * SVG_PAD) / root : 0;
	measure(&c, 0);
	h = TOP_H + (int)(c.max_depth + 1) * FRAME_H + BOTTOM_H;
	ow_printf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		  "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
		  "viewBox=\"0 0 %d %d\">\n",
		  SVG_W, h, SVG_W, h);
	ow_puts(w, "<style>\n"
		   "text { font: 12px monospace; fill: #000; }\n"
		   "g.f text { pointer-events: none; }\n"
		   "g.f:hover rect { stroke: #000; stroke-width: 0.5; cursor: pointer; }\n"
		   "g.anc rect { opacity: 0.5; }\n"
		   ".hide { display: none; }\n"
		   ".ctl { cursor: pointer; fill: #036; }\n"
		   "#title { font-size: 17px; }\n"
		   "</style>\n<script type=\"text/ecmascript\"><![CDATA[\n");
	ow_puts(w, script);
	ow_printf(w, "]]></script>\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f8f8f4\"/>\n", SVG_W, h);
	ow_printf(w, "<text id=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">", SVG_W / 2);
	xml_escape(w, title, strlen(title));
	ow_printf(w, "</text>\n<text id=\"subtitle\" x=\"%d\" y=\"42\" text-anchor=\"middle\" fill=\"#555\">", SVG_W / 2);
	xml_escape(w, subtitle, strlen(subtitle));
	ow_printf(w, "</text>\n<text id=\"reset\" class=\"ctl hide\" x=\"%d\" y=\"24\">Reset Zoom</text>\n"
		  "<text id=\"search\" class=\"ctl\" x=\"%d\" y=\"24\" text-anchor=\"end\">Search</text>\n"
		  "<text id=\"matched\" x=\"%d\" y=\"%d\" text-anchor=\"end\"></text>\n"
		  "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n",
		  SVG_PAD, SVG_W - SVG_PAD, SVG_W - SVG_PAD, h - 10, SVG_PAD, h - 10);
	draw(&c, 0, 0);
	ow_puts(w, "</svg>\n");
}
