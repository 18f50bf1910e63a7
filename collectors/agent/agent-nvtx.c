/* SPDX-License-Identifier: MIT */
/*
 * agent-nvtx.c - NVTX records -> the trace store (agent-nvtx.h).
 *
 * DESIGN
 * ------
 * The agent sends two kinds of NVTX record (agent-proto.h): a finished
 * RANGE with its ancestors, and at each kept CUDA call made inside a range
 * a LAUNCH with the thread's stack under the call's correlation id. The
 * agent queues a LAUNCH at the call and sends it before the CUPTI buffer
 * that holds the call's GPU work, so the stack is known here when the
 * kernel, copy or memset arrives: agent-map.c asks agent_nvtx_statset()
 * for its stats. Nothing waits; only the step ids are rewritten, when a
 * window is described (agent-steps.h).
 *
 * What goes where (docs/agent.md "NVTX", reference protocol §4.4, §4.9):
 *   - a range: /host:CPU, line "<comm> (pid P)/tid T/NVTX" (id: pid in the
 *     high half, tid | 2^30 low, so it never shares a trace-viewer track
 *     with the thread's API line), event = the text before '#', stats =
 *     its `key=value` pairs, nvtx_domain, marker_payload; a step range
 *     also `_r` = 1 and step_num (int64), everything inside a step
 *     group_id (int64);
 *   - GPU work and API calls inside ranges: tf_op = the op (agent_nvtx_tf_op():
 *     an XLA op's "<hlo_op>:<its kind>", else the innermost framework-op
 *     range under the step, scoped by the ranges in between), nvtx_range =
 *     the innermost range's text, every `key=value`
 *     pair of the stack (innermost wins; digits as int64, else a string),
 *     except that hlo_op is written as hlo_op_name (XProf's op metrics
 *     drop an event whose hlo_op has no HLO proto), and group_id.
 * Steps: the outermost range of the stack whose name matches a step
 * pattern. Each gets a hub id when first seen (agent-steps.h), written as
 * group_id and step_num, and its times; a window's description numbers
 * them per window and rewrites the ids.
 */
#define LOG_TOPIC "collector.agent"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent-nvtx.h"
#include "base/hash.h"
#include "base/macro.h"
#include "base/strtab.h"
#include "corrmap.h"
#include "xspace/names.h"

/* The range stack of a launch, by its correlation id in ns->corr. */
struct corr_ent {
	uint32_t step; /* group_id, 0 = none */
	int32_t step_lv; /* the step's level, -1 = none */
	uint32_t n;
	uint32_t text[AGENT_NVTX_MAX_LEVELS];
};

struct agent_nvtx_src {
	struct corrmap corr; /* correlation -> struct corr_ent (launch_of()) */
	struct {
		uint32_t serial, no;
	} steps[AGENT_NVTX_MAX_STEPS];
	uint32_t n_steps;
	uint64_t steps_gen; /* the map's resets when steps were numbered: per capture */
	/* XLA modules seen (steps from the first one to run twice, unless
	 * step-pattern ranges exist) */
	struct {
		uint64_t hash;
		uint32_t last_serial, runs;
	} mods[AGENT_NVTX_MAX_MODULES];
	uint32_t n_mods;
	uint64_t step_module; /* its hash, 0 = none chosen */
	char step_module_name[64];
	bool pattern_seen; /* step-pattern ranges: module steps stay off */
	/* Ranges this process holds in the hub, within AGENT_NVTX_MAX_RANGES:
	 * counted as they are put, recounted when the hub's trims move (a
	 * window's end, the flight recorder's ring, which never empties the
	 * hub while it records), zero in a new hub. */
	uint64_t ranges;
	uint64_t gen;    /* the map's resets when ranges was counted */
	uint64_t trims;  /* the hub's trims then */
	bool any;        /* NVTX records ever came from this process */
	uint64_t module_steps; /* since a window last closed */
	/* the hints' counts: agent_src's tally (AT_NVTX_*) */
};

/* Every process's launch stacks together (loop thread): see
 * AGENT_NVTX_LAUNCHES_ALL. */
static struct corrmap_share launches_all = { .max = AGENT_NVTX_LAUNCHES_ALL, .floor = AGENT_NVTX_LAUNCHES_MIN };

#define MAX_PATTERNS 32
static char *patterns[MAX_PATTERNS];
static unsigned n_patterns;

int agent_nvtx_check_step_patterns(const char *csv)
{
	unsigned names = 1;
	size_t len = 0;

	for (const char *p = csv; *p; p++) {
		if (*p == ',') {
			if (!len)
				return -EINVAL;
			names++;
			len = 0;
		} else if (isalnum((unsigned char)*p) || strchr("_.-", *p)) {
			if (++len > 63)
				return -EINVAL;
		} else {
			return -EINVAL;
		}
	}
	return len && names <= MAX_PATTERNS ? 0 : -EINVAL;
}

void agent_nvtx_set_step_patterns(const char *csv)
{
	const char *p = csv ? csv : AGENT_NVTX_STEP_PATTERNS;

	for (unsigned i = 0; i < n_patterns; i++)
		free(patterns[i]);
	n_patterns = 0;
	while (*p && n_patterns < MAX_PATTERNS) {
		size_t n = strcspn(p, ",");

		if (n && (patterns[n_patterns] = strndup(p, n)))
			n_patterns++;
		p += n;
		if (*p == ',')
			p++;
	}
}

static struct agent_nvtx_src *state(struct agent_src *s)
{
	if (!s->nvtx && (s->nvtx = calloc(1, sizeof(*s->nvtx))))
		corrmap_init(&s->nvtx->corr, sizeof(struct corr_ent), AGENT_NVTX_LAUNCHES, &launches_all);
	return s->nvtx;
}

void agent_nvtx_src_free(struct agent_src *s)
{
	if (s->nvtx)
		corrmap_free(&s->nvtx->corr);
	free(s->nvtx);
	s->nvtx = NULL;
}

/* The name part of a range text: up to the first '#'. */
static size_t name_len(const char *t) { return strcspn(t, "#"); }

/* A step: the name, or its last part after '.', ']', '/', ':' or ' ',
 * starts with a pattern (any case) not followed by a letter. */
bool agent_nvtx_is_step(const char *t)
{
	size_t n = name_len(t), from = 0;

	if (!n_patterns)
		agent_nvtx_set_step_patterns(NULL);
	for (size_t i = 0; i < n; i++)
		if (strchr(".]/: ", t[i]) && i + 1 < n)
			from = i + 1;
	for (unsigned k = 0; k < n_patterns; k++) {
		size_t pl = strlen(patterns[k]);

		for (size_t at = 0; at <= from; at += from ? from : 1) {
			if (n - at >= pl && strncasecmp(t + at, patterns[k], pl) == 0 &&
			    (n - at == pl || !isalpha((unsigned char)t[at + pl])))
				return true;
			if (!from)
				break;
		}
	}
	return false;
}

/* Digits (an optional '-' first, at most 18) read as int64. */
static bool as_i64(const char *v, size_t n, int64_t *ret)
{
	size_t i = v[0] == '-' ? 1 : 0;
	int64_t x = 0;

	if (n <= i || n - i > 18)
		return false;
	for (; i < n; i++) {
		if (!isdigit((unsigned char)v[i]))
			return false;
		x = x * 10 + (v[i] - '0');
	}
	*ret = v[0] == '-' ? -x : x;
	return true;
}

struct kv {
	char k[64], v[256];
};

/* The `key=value` pairs of "name#k=v,k2=v2#" into @kv (a key seen again
 * is replaced: callers go outermost first, so the innermost wins). */
static unsigned parse_pairs(const char *t, struct kv *kv, unsigned n, unsigned max)
{
	const char *p = t + name_len(t);

	if (*p != '#')
		return n;
	p++;
	while (*p && *p != '#') {
		size_t len = strcspn(p, ",#"), eq = strcspn(p, "=");
		unsigned at = n;

		if (eq < len && eq > 0 && eq < sizeof(kv[0].k) && len - eq - 1 < sizeof(kv[0].v)) {
			for (unsigned i = 0; i < n; i++)
				if (strlen(kv[i].k) == eq && strncmp(kv[i].k, p, eq) == 0)
					at = i;
			if (at < max) {
				memcpy(kv[at].k, p, eq);
				kv[at].k[eq] = 0;
				memcpy(kv[at].v, p + eq + 1, len - eq - 1);
				kv[at].v[len - eq - 1] = 0;
				if (at == n)
					n++;
			}
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return n;
}

/* Never 0: a module hash of 0 means none chosen. */
static uint64_t hash_n(const char *t, size_t n) { return hash_bytes64(t, n) | 1; }

static uint64_t hash_str(const char *t) { return hash_n(t, strlen(t)); }

/* The step (hub id, agent-steps.h) of range @serial named @t, a new one if
 * not seen yet among the process's last AGENT_NVTX_MAX_STEPS (0: out of
 * memory or ids). Per hub. */
static uint32_t step_no(struct agent_src *s, struct agent_nvtx_src *ns, uint32_t serial, const char *t)
{
	uint32_t id;

	if (ns->steps_gen != s->m->resets) {
		ns->n_steps = 0;
		ns->steps_gen = s->m->resets;
	}
	for (uint32_t j = ns->n_steps; j-- > 0;)
		if (ns->steps[j].serial == serial)
			return ns->steps[j].no;
	if (ns->n_steps >= AGENT_NVTX_MAX_STEPS) {
		/* A hub never emptied (the flight recorder's): the oldest half
		 * goes, as the hub's own step table does (agent-steps.h). */
		uint32_t drop = ns->n_steps / 2;

		memmove(ns->steps, ns->steps + drop, (ns->n_steps - drop) * sizeof(ns->steps[0]));
		ns->n_steps -= drop;
	}
	id = agent_steps_new(&s->m->steps, s->pid, (uint32_t)hash_n(t, name_len(t)));
	if (!id)
		return 0;
	ns->steps[ns->n_steps].serial = serial;
	ns->steps[ns->n_steps].no = id;
	ns->n_steps++;
	return id;
}

/* An execution of an XLA module (XlaModule:#hlo_module=M,...#, range
 * @serial): counted per module; the first module seen in two executions
 * becomes the step module. Whether this execution is one of its steps. */
static bool module_step(struct agent_nvtx_src *ns, const char *t, uint32_t serial)
{
	struct kv kv[16];
	unsigned n;
	uint64_t h;
	uint32_t i;

	if (strncmp(t, "XlaModule", 9) != 0)
		return false;
	n = parse_pairs(t, kv, 0, 16);
	for (i = 0; i < n && strcmp(kv[i].k, XN_STAT_HLO_MODULE) != 0; i++)
		;
	if (i == n)
		return false;
	h = hash_str(kv[i].v);
	if (!ns->step_module) {
		uint32_t m;

		for (m = 0; m < ns->n_mods && ns->mods[m].hash != h; m++)
			;
		if (m == ns->n_mods) {
			if (m >= AGENT_NVTX_MAX_MODULES)
				return false;
			ns->mods[m].hash = h;
			ns->n_mods++;
		}
		if (ns->mods[m].last_serial != serial) {
			ns->mods[m].last_serial = serial;
			if (++ns->mods[m].runs >= 2) {
				ns->step_module = h;
				snprintf(ns->step_module_name, sizeof(ns->step_module_name), "%.63s", kv[i].v);
			}
		}
	}
	return ns->step_module == h;
}

/* The group_id of a stack, numbering a new step; 0 when none. The
 * outermost range matching a step pattern; failing any such range in the
 * process, the execution of the step module (module_step()). *@level: the
 * step's level (-1: none). */
static uint32_t step_of(struct agent_src *s, struct agent_nvtx_src *ns, const struct agent_nvtx_level *lv,
			uint32_t n, int *level)
{
	*level = -1;
	for (uint32_t i = 0; i < n; i++) {
		const char *t = agent_map_str(s, lv[i].text_id, NULL);

		if (!t || !lv[i].serial || !agent_nvtx_is_step(t))
			continue;
		*level = (int)i;
		ns->pattern_seen = true;
		return step_no(s, ns, lv[i].serial, t);
	}
	if (ns->pattern_seen)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		const char *t = agent_map_str(s, lv[i].text_id, NULL);
		uint32_t no;

		if (!t || !lv[i].serial || !module_step(ns, t, lv[i].serial))
			continue;
		*level = (int)i;
		no = step_no(s, ns, lv[i].serial, t);
		ns->module_steps += no != 0;
		return no;
	}
	return 0;
}

static void put_pairs(struct trace_plane *p, struct buf *b, const struct kv *kv, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		const char *k = strcmp(kv[i].k, XN_STAT_HLO_OP) == 0 ? XN_STAT_HLO_OP_NAME : kv[i].k;
		int64_t x;

		if (as_i64(kv[i].v, strlen(kv[i].v), &x))
			trace_stat_i64(p, b, k, x);
		else
			trace_stat_str_ref(p, b, k, kv[i].v);
	}
}

/* The XLA op of a stack: "<hlo_op>:<its kind>" (fusion.3 -> "fusion.3:fusion"),
 * since hlo_op itself cannot be written (see the top). False without one. */
static bool xla_op_text(const struct kv *kv, unsigned n, char *op, size_t size)
{
	for (unsigned i = 0; i < n; i++) {
		size_t len;

		if (strcmp(kv[i].k, XN_STAT_HLO_OP) != 0 || !kv[i].v[0])
			continue;
		len = strlen(kv[i].v);
		while (len > 1 && isdigit((unsigned char)kv[i].v[len - 1]))
			len--;
		if (len > 1 && kv[i].v[len - 1] == '.')
			len--;
		else
			len = strlen(kv[i].v);
		snprintf(op, size, "%s:%.*s", kv[i].v, (int)len, kv[i].v);
		return true;
	}
	return false;
}

/* The part of a range text that names it: before '#', and before the
 * ", seq = " / ", op_id = " / ", sizes = " that PyTorch's emit_nvtx()
 * appends to an operator's name. */
static size_t op_name_len(const char *t)
{
	static const char *const tails[] = { ", seq = ", ", op_id = ", ", sizes = ", ", input_op_ids = " };
	size_t n = name_len(t);

	for (size_t i = 0; i < ARRAY_SIZE(tails); i++) {
		const char *at = strstr(t, tails[i]);

		if (at && (size_t)(at - t) < n)
			n = (size_t)(at - t);
	}
	return n;
}

static bool all_of(const char *t, size_t n, const char *set, bool alnum)
{
	for (size_t i = 0; i < n; i++)
		if (!(alnum && isalnum((unsigned char)t[i])) && !strchr(set, t[i]))
			return false;
	return true;
}

/* XProf's op types (tf_op_utils.cc): TensorFlow's [A-Z_][a-zA-Z0-9_]*, JAX's
 * [a-z_][a-z0-9_]*, optionally "[...]". */
static bool tf_type(const char *t, size_t n)
{
	return n && (isupper((unsigned char)t[0]) || t[0] == '_') && all_of(t, n, "_", true);
}

static bool jax_type(const char *t, size_t n)
{
	const char *br = memchr(t, '[', n);
	size_t m = br ? (size_t)(br - t) : n;

	if (br && t[n - 1] != ']')
		return false;
	if (!m || !(islower((unsigned char)t[0]) || t[0] == '_'))
		return false;
	for (size_t i = 0; i < m; i++)
		if (!islower((unsigned char)t[i]) && !isdigit((unsigned char)t[i]) && t[i] != '_')
			return false;
	return true;
}

/* TensorFlow's op names: [A-Za-z0-9.][A-Za-z0-9_./>-]*. */
static bool tf_name(const char *t, size_t n)
{
	return n && (isalnum((unsigned char)t[0]) || t[0] == '.') && all_of(t, n, "_./>-", true);
}

struct op_form {
	const char *name, *type; /* within the range text */
	size_t name_n, type_n;
};

/*
 * Whether the range text @t names a framework op in a form XProf's
 * ParseTfOpFullname() gives a category (tf_op_utils.cc): "name:Type"
 * (TensorFlow, e.g. dense:MatMul) or "name:type" (JAX), or PyTorch's
 * "ns::op[.overload]" (aten::mm, as emit_nvtx() and record_function name
 * operators), which XProf does not parse: its name is then the whole text
 * and its type the op, written in the JAX form "aten.mm:mm" (put_scope()).
 */
static bool op_form(const char *t, struct op_form *f)
{
	size_t n = op_name_len(t), c = strcspn(t, ":");

	if (c >= n || c == 0 || (c == 8 && strncmp(t, "Iterator", 8) == 0)) /* tf.data's, as it is */
		return false;
	if (c + 2 < n && t[c + 1] == ':') {
		f->name = t;
		f->name_n = n;
		f->type = t + c + 2;
		f->type_n = strcspn(f->type, ".");
		if (f->type_n > n - c - 2)
			f->type_n = n - c - 2;
		return all_of(t, c, "_", true) && all_of(f->type, n - c - 2, "_.", true) &&
		       (jax_type(f->type, f->type_n) || tf_type(f->type, f->type_n));
	}
	f->name = t;
	f->name_n = c;
	f->type = t + c + 1;
	f->type_n = n - c - 1;
	return (tf_type(f->type, f->type_n) && tf_name(t, c)) || jax_type(f->type, f->type_n);
}

/* Append @t (@n bytes) to the op name @op (@size, NUL-terminated) as
 * TensorFlow's op names allow it ([A-Za-z0-9.][A-Za-z0-9_./>-]*): "::"
 * becomes '.', any other character outside the set '_'. */
static void put_scope(char *op, size_t size, const char *t, size_t n)
{
	size_t at = strlen(op);

	for (size_t i = 0; i < n && at + 1 < size; i++) {
		char ch = t[i];

		if (ch == ':') {
			if (at && op[at - 1] == '.')
				continue;
			ch = '.';
		} else if (!isalnum((unsigned char)ch) && !strchr("_./>-", ch)) {
			ch = '_';
		}
		if (!at && !isalnum((unsigned char)ch) && ch != '.')
			continue;
		op[at++] = ch;
	}
	op[at] = 0;
}

void agent_nvtx_tf_op(const char *const *texts, uint32_t n, int step, char *op, size_t size)
{
	struct kv kv[16];
	unsigned nkv = 0;
	uint32_t from = step >= 0 ? (uint32_t)step + 1 : 0, k;
	struct op_form f;
	bool found = false;

	if (!size)
		return;
	op[0] = 0;
	for (uint32_t i = 0; i < n; i++)
		if (texts[i])
			nkv = parse_pairs(texts[i], kv, nkv, 16);
	if (!n || xla_op_text(kv, nkv, op, size))
		return;
	/* The innermost framework op under the step... */
	for (k = n; k > from && !found;)
		found = texts[--k] && op_form(texts[k], &f);
	if (!found) {
		/* ...else the innermost range's name, as it is. */
		const char *t = texts[n - 1] ? texts[n - 1] : "";

		snprintf(op, size, "%.*s", (int)op_name_len(t), t);
		return;
	}
	/* ...its name scope the ranges between the step and it. */
	for (uint32_t i = from; i < k; i++) {
		struct op_form g;
		const char *t = texts[i];

		if (!t)
			continue;
		if (op_form(t, &g))
			put_scope(op, size, g.name, g.name_n);
		else
			put_scope(op, size, t, op_name_len(t));
		if (op[0] && op[strlen(op) - 1] != '/')
			put_scope(op, size, "/", 1);
	}
	put_scope(op, size, f.name, f.name_n);
	if (strlen(op) + 1 + f.type_n < size)
		snprintf(op + strlen(op), size - strlen(op), ":%.*s", (int)f.type_n, f.type);
}

/* The launch stack remembered for correlation @corr of @s, or NULL. */
static const struct corr_ent *launch_of(struct agent_src *s, uint32_t corr)
{
	const struct corr_ent *e = s->nvtx ? corrmap_get(&s->nvtx->corr, corr) : NULL;

	return e && e->n ? e : NULL;
}

/* The kv pairs of every level of @e; the outermost and innermost texts. */
static unsigned launch_pairs(struct agent_src *s, const struct corr_ent *e, struct kv *kv, unsigned max,
			     const char **outer, const char **inner)
{
	unsigned nkv = 0;

	*outer = agent_map_str(s, e->text[0], NULL);
	*inner = agent_map_str(s, e->text[e->n - 1], NULL);
	for (uint32_t i = 0; i < e->n; i++) {
		const char *t = agent_map_str(s, e->text[i], NULL);

		if (t)
			nkv = parse_pairs(t, kv, nkv, max);
	}
	return nkv;
}

/* The tf_op text of launch stack @e (agent_nvtx_tf_op()). */
static void tf_op_text(struct agent_src *s, const struct corr_ent *e, char *op, size_t size)
{
	const char *texts[AGENT_NVTX_MAX_LEVELS];

	for (uint32_t i = 0; i < e->n; i++)
		texts[i] = agent_map_str(s, e->text[i], NULL);
	agent_nvtx_tf_op(texts, e->n, e->step_lv, op, size);
}

bool agent_nvtx_op_of(struct agent_src *s, uint32_t corr, char *tf_op, size_t size, int64_t *group_id)
{
	const struct corr_ent *e = launch_of(s, corr);

	*group_id = -1;
	if (!e || !agent_map_str(s, e->text[0], NULL) || !agent_map_str(s, e->text[e->n - 1], NULL))
		return false;
	tf_op_text(s, e, tf_op, size);
	if (e->step)
		*group_id = e->step;
	return true;
}

void agent_nvtx_derive(struct agent_src *s, uint32_t plane, int64_t start, int64_t dur, uint32_t corr)
{
	struct agent_derived *ad = &s->m->derived;
	const struct corr_ent *e = launch_of(s, corr);
	const char *outer, *inner;
	char text[sizeof(((struct kv *)0)->v) * 2 + 2];
	struct kv kv[16];
	unsigned nkv;

	if (!e || !e->step)
		return;
	nkv = launch_pairs(s, e, kv, 16, &outer, &inner);
	if (!outer || !inner)
		return;
	snprintf(text, sizeof(text), "%u", e->step);
	agent_derived_add(ad, plane, AGENT_DERIVED_STEPS, text, start, dur, e->step);
	tf_op_text(s, e, text, sizeof(text));
	agent_derived_add(ad, plane, AGENT_DERIVED_FRAMEWORK_OPS, text, start, dur, e->step);
	for (unsigned i = 0; i < nkv; i++) {
		if (strcmp(kv[i].k, XN_STAT_HLO_MODULE) == 0)
			agent_derived_add(ad, plane, AGENT_DERIVED_XLA_MODULES, kv[i].v, start, dur, e->step);
		else if (strcmp(kv[i].k, XN_STAT_HLO_OP) == 0)
			agent_derived_add(ad, plane, AGENT_DERIVED_XLA_OPS, kv[i].v, start, dur, e->step);
	}
}

int64_t agent_nvtx_statset(struct agent_src *s, struct trace_plane *p, struct buf *b, int64_t base, uint32_t corr)
{
	struct agent_nvtx_src *ns = state(s);
	bool host = p == s->m->host_plane;
	const struct corr_ent *e;
	struct kv kv[16];
	char op[sizeof(kv[0].v) * 2 + 2];
	unsigned nkv;
	const char *outer, *inner;

	if (!ns || base < 0)
		return base;
	if (!host)
		s->tally[AT_NVTX_GPU]++;
	if (!(e = launch_of(s, corr)))
		return base;
	nkv = launch_pairs(s, e, kv, 16, &outer, &inner);
	if (!outer || !inner)
		return base;
	if (!host) {
		s->tally[AT_NVTX_ANNOTATED]++;
		s->tally[AT_NVTX_IN_STEP] += e->step != 0;
	}
	if (base > 0) {
		size_t len;
		const char *bytes = strtab_get(&p->statsets, (uint32_t)base, &len);

		buf_put(b, bytes, len);
	}
	tf_op_text(s, e, op, sizeof(op));
	trace_stat_str_ref(p, b, XN_STAT_TF_OP, op);
	trace_stat_str_ref(p, b, XN_STAT_NVTX_RANGE, inner);
	put_pairs(p, b, kv, nkv);
	if (e->step)
		trace_stat_i64(p, b, XN_STAT_GROUP_ID, e->step);
	return trace_plane_statset(p, b);
}

static void put_launch(struct agent_nvtx_src *ns, struct agent_src *s, const struct agent_rec_view *v)
{
	struct corr_ent e = { .n = MIN(v->n_levels, AGENT_NVTX_MAX_LEVELS) };

	for (uint32_t i = 0; i < e.n; i++)
		e.text[i] = v->levels[i].text_id;
	e.step = step_of(s, ns, v->levels, e.n, &e.step_lv);
	/* Correlation 0 (none) or no memory: the kernel goes unannotated. */
	corrmap_put(&ns->corr, v->r.nvtx.correlation, &e);
	/* Until its range ends, a step's launches tell when it ran. */
	if (e.step && s->clock_known) {
		int64_t at, dur;

		if (agent_map_place_times(s, v->r.nvtx.start, v->r.nvtx.end, &at, &dur))
			agent_steps_time(&s->m->steps, e.step, at, trace_end_ns(at, dur), false);
	}
}

static void put_range(struct agent_nvtx_src *ns, struct agent_src *s, const struct agent_rec_view *v)
{
	const struct agent_rec_nvtx *r = &v->r.nvtx;
	struct agent_map *m = s->m;
	const char *t = agent_map_str(s, v->levels[v->n_levels - 1].text_id, "(unnamed NVTX range)");
	char name[AGENT_MAX_STRING_LEN + 1], lname[160];
	struct trace_event ev = { 0 };
	struct trace_line *l;
	struct kv kv[16];
	unsigned nkv;
	int64_t meta, set;
	int step_lv;
	uint32_t step = step_of(s, ns, v->levels, v->n_levels, &step_lv);
	bool self = step_lv == (int)v->n_levels - 1;

	if (ns->gen != m->resets) {
		ns->ranges = 0;
		ns->gen = m->resets;
		ns->trims = m->c->hub->trims;
	} else if (ns->trims != m->c->hub->trims) {
		ns->ranges = agent_map_held(s, AGENT_MAP_LINE_NVTX);
		ns->trims = m->c->hub->trims;
	}
	if (ns->ranges >= AGENT_NVTX_MAX_RANGES) {
		s->tally[AT_NVTX_DROPPED]++;
		return;
	}
	if (!agent_map_place_times(s, r->start, r->end, &ev.start_ns, &ev.dur_ns))
		return;
	if (step && self)
		agent_steps_time(&m->steps, step, ev.start_ns, trace_end_ns(ev.start_ns, ev.dur_ns), true);
	snprintf(lname, sizeof(lname), XN_LINE_NVTX_FMT, s->name, s->pid, r->tid);
	l = agent_map_aux_line(s, AGENT_MAP_LINE_NVTX, r->tid, lname);
	if (!l)
		return;
	memcpy(name, t, name_len(t));
	name[name_len(t)] = 0;
	meta = trace_plane_event_id(m->host_plane, name[0] ? name : t);
	nkv = parse_pairs(t, kv, 0, 16);
	put_pairs(m->host_plane, &m->sb, kv, nkv);
	if (r->domain_id)
		trace_stat_str_ref(m->host_plane, &m->sb, XN_STAT_NVTX_DOMAIN, agent_map_str(s, r->domain_id, "?"));
	switch (r->payload_type) {
	case AGENT_NVTX_PAYLOAD_U64: trace_stat_u64(m->host_plane, &m->sb, XN_STAT_NVTX_PAYLOAD, r->payload); break;
	case AGENT_NVTX_PAYLOAD_I64:
		trace_stat_i64(m->host_plane, &m->sb, XN_STAT_NVTX_PAYLOAD, (int64_t)r->payload);
		break;
	case AGENT_NVTX_PAYLOAD_DOUBLE: {
		double d;

		memcpy(&d, &r->payload, sizeof(d));
		trace_stat_double(m->host_plane, &m->sb, XN_STAT_NVTX_PAYLOAD, d);
		break;
	}
	default: break;
	}
	if (step) {
		/* XProf's own root-event convention, and the group it heads. */
		if (self) {
			trace_stat_i64(m->host_plane, &m->sb, XN_STAT_IS_ROOT, 1);
			trace_stat_i64(m->host_plane, &m->sb, XN_STAT_STEP_NUM, step);
		}
		trace_stat_i64(m->host_plane, &m->sb, XN_STAT_GROUP_ID, step);
	}
	set = trace_plane_statset(m->host_plane, &m->sb);
	if (meta < 0 || set < 0)
		return;
	ev.meta = (uint32_t)meta;
	ev.statset = (uint32_t)set;
	if (trace_line_append(l, &ev) == 0)
		ns->ranges++;
}

void agent_nvtx_record(struct agent_src *s, const struct agent_rec_view *v, bool take)
{
	struct agent_nvtx_src *ns = state(s);

	if (!ns)
		return;
	ns->any = true;
	/* Launch stacks are kept even outside a capture's records: they are
	 * small, and the GPU work they name may arrive once it is taken. */
	if (v->r.nvtx.kind == AGENT_NVTX_LAUNCH)
		put_launch(ns, s, v);
	else if (take)
		put_range(ns, s, v);
}

void agent_nvtx_describe(struct agent_src *s, const uint64_t *n)
{
	struct agent_nvtx_src *ns = s->nvtx;

	if (!ns)
		return;
	if (n[AT_NVTX_DROPPED])
		agent_map_note(s->m, "pid %u (%s): %llu NVTX ranges beyond the budget of %u held at once were dropped",
			       s->pid, s->name, (unsigned long long)n[AT_NVTX_DROPPED], AGENT_NVTX_MAX_RANGES);
	if (!(s->hello_flags & AGENT_HELLO_NVTX) || s->m->nvtx_off) {
		/* An agent that cannot collect NVTX, or was asked for none
		 * (docs/options.md): the hints would mislead. */
		ns->module_steps = 0;
		return;
	}
	if (n[AT_NVTX_GPU] && !n[AT_NVTX_ANNOTATED])
		agent_map_note(s->m, "pid %u (%s): no op names: its GPU work ran outside any NVTX range, so "
				     "XProf's overview, framework op stats and op profile stay empty; wrap ops and "
				     "steps in NVTX ranges (PyTorch: torch.cuda.nvtx.range or "
				     "torch.autograd.profiler.emit_nvtx(); docs/agent.md, NVTX)",
			       s->pid, s->name);
	if (n[AT_NVTX_GPU] && !n[AT_NVTX_IN_STEP])
		agent_map_note(s->m, "pid %u (%s): no steps found: no NVTX range named like a training step "
				     "(--step-pattern) enclosed its GPU work; wrap each step in one, e.g. "
				     "torch.cuda.nvtx.range(\"train_step\")",
			       s->pid, s->name);
	else if (n[AT_NVTX_IN_STEP] && ns->pattern_seen)
		agent_map_info(s->m, "pid %u (%s): %u steps in this window, from NVTX ranges matching the step "
				     "pattern; host and GPU events inside carry group_id",
			       s->pid, s->name, agent_steps_of(&s->m->steps, s->pid));
	else if (n[AT_NVTX_IN_STEP])
		agent_map_info(s->m, "pid %u (%s): %u steps in this window, from the executions of XLA module %s "
				     "(the first module it ran twice; no NVTX range matched the step pattern); "
				     "host and GPU events inside carry group_id",
			       s->pid, s->name, agent_steps_of(&s->m->steps, s->pid), ns->step_module_name);
	ns->module_steps = 0;
}
