/* SPDX-License-Identifier: MIT */
/*
 * proc-io-parse.c - see proc-io-parse.h.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "base/macro.h"
#include "proc-io-parse.h"

struct cursor {
	const char *p, *end;
};

static bool next_line(struct cursor *c, const char **ret, size_t *ret_len)
{
	const char *nl;

	if (c->p >= c->end)
		return false;
	nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
	*ret = c->p;
	*ret_len = nl ? (size_t)(nl - c->p) : (size_t)(c->end - c->p);
	c->p = nl ? nl + 1 : c->end;
	return true;
}

/* Up to @max blank-separated unsigned numbers from [p, end). Returns how
 * many, or -EINVAL at a token that is not a number. */
static int numbers(const char *p, const char *end, uint64_t *v, int max)
{
	int n = 0;

	while (n < max) {
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (p >= end)
			break;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		uint64_t x = 0;
		while (p < end && *p >= '0' && *p <= '9')
			x = x * 10 + (uint64_t)(*p++ - '0');
		v[n++] = x;
	}
	return n;
}

int proc_net_is_virtual(const char *name, size_t len)
{
	/* Loopback, and the devices container runtimes and bridges add on top
	 * of a physical NIC: their traffic already crossed (or will cross) it. */
	static const char *const prefixes[] = {
		"veth", "docker", "br-", "virbr", "cni", "flannel", "cali", "vxlan", "tunl",
		"kube-", "cilium", "lxc", "weave", "genev",
	};

	if (len == 2 && memcmp(name, "lo", 2) == 0)
		return 1;
	for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++) {
		size_t k = strlen(prefixes[i]);

		if (len >= k && memcmp(name, prefixes[i], k) == 0)
			return 1;
	}
	return 0;
}

int proc_net_dev_parse(const char *buf, size_t len, struct net_totals *out)
{
	struct cursor c = {buf, buf + len};
	struct net_totals t = {0};
	const char *l;
	size_t n;
	int lineno = 0;

	while (next_line(&c, &l, &n)) {
		const char *colon, *name;
		uint64_t v[16];

		if (lineno++ < 2) /* two header lines */
			continue;
		colon = memchr(l, ':', n);
		if (!colon)
			return -EINVAL;
		name = l;
		while (name < colon && *name == ' ')
			name++;
		if (numbers(colon + 1, l + n, v, 16) < 9)
			return -EINVAL;
		if (proc_net_is_virtual(name, (size_t)(colon - name)))
			continue;
		t.rx_bytes += v[0];
		t.tx_bytes += v[8];
		t.n_ifaces++;
	}
	if (lineno < 2)
		return -EINVAL;
	*out = t;
	return 0;
}

static bool all_digits(const char *s) { return *s && strspn(s, "0123456789") == strlen(s); }

int proc_disk_is_whole(const char *name)
{
	static const char *const letters[] = {"sd", "vd", "xvd", "hd"};

	for (size_t i = 0; i < ARRAY_SIZE(letters); i++) {
		size_t k = strlen(letters[i]);

		if (strncmp(name, letters[i], k) == 0 && name[k] &&
		    strspn(name + k, "abcdefghijklmnopqrstuvwxyz") == strlen(name + k))
			return 1;
	}
	if (strncmp(name, "nvme", 4) == 0) { /* nvme<d>n<d>, not nvme<d>n<d>p<d> */
		const char *p = name + 4;
		size_t d = strspn(p, "0123456789");

		if (!d || p[d] != 'n')
			return 0;
		return all_digits(p + d + 1);
	}
	if (strncmp(name, "mmcblk", 6) == 0)
		return all_digits(name + 6);
	return 0;
}

int proc_diskstats_parse(const char *buf, size_t len, struct disk_totals *out)
{
	struct cursor c = {buf, buf + len};
	struct disk_totals t = {0};
	const char *l;
	size_t n;

	while (next_line(&c, &l, &n)) {
		uint64_t head[2], v[11];
		const char *p = l, *end = l + n, *name;
		char dev[64];
		size_t k;

		if (n == 0)
			continue;
		/* major minor name fields... */
		const char *q = p;
		for (int f = 0; f < 2; f++) {
			while (q < end && *q == ' ')
				q++;
			const char *s = q;
			while (q < end && *q != ' ')
				q++;
			if (numbers(s, q, &head[f], 1) != 1)
				return -EINVAL;
		}
		while (q < end && *q == ' ')
			q++;
		name = q;
		while (q < end && *q != ' ')
			q++;
		k = (size_t)(q - name);
		if (k == 0 || k >= sizeof(dev))
			return -EINVAL;
		memcpy(dev, name, k);
		dev[k] = 0;
		if (numbers(q, end, v, 11) < 7)
			return -EINVAL;
		if (!proc_disk_is_whole(dev))
			continue;
		/* Sectors are always 512 bytes here (Documentation/admin-guide/iostats). */
		t.read_bytes += v[2] * 512;
		t.write_bytes += v[6] * 512;
		t.n_disks++;
	}
	*out = t;
	return 0;
}

