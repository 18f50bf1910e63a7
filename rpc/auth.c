/* SPDX-License-Identifier: MIT */
/*
 * auth.c - who may call profd, and how profctl proves who it is.
 *
 * Everything a client sends here is hostile: the peer string comes from
 * gRPC (trusted format, but parsed defensively), the metadata from the
 * client. The order of the checks is fixed and documented in
 * docs/security.md: address (PERMISSION_DENIED), then client certificate,
 * then token (both UNAUTHENTICATED). Files are read once at start-up, so a
 * later change of a file needs a restart; they are opened by
 * file_read_small() (base/file.h), which never blocks on a FIFO.
 */
#define LOG_TOPIC "rpc.auth"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <grpc/support/alloc.h>

#include "auth.h"
#include "base/file.h"
#include "base/log.h"

#define PEM_MAX (1u << 20)  /* a certificate chain or key file */
#define TOKEN_MAX 4096u     /* a token file */
#define MAX_ALLOW 64

struct cidr {
	int family;        /* AF_INET (4 bytes used) or AF_INET6 */
	uint8_t addr[16];
	unsigned prefix;
};

struct rpc_auth {
	struct cidr allow[MAX_ALLOW];
	size_t n_allow;
	char *cert_pem, *key_pem, *client_ca_pem; /* NULL: plain listeners / no mTLS */
	char *token;                              /* NULL: no token needed */
	size_t token_len;
};

/* ---- files ------------------------------------------------------------- */

static void free_secret(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

/*
 * The token: the file's content with surrounding whitespace removed. It goes
 * into an HTTP/2 header, so only visible ASCII is allowed (no spaces inside
 * either, which would make "Bearer a b" ambiguous).
 */
static int read_token(const char *path, char **ret, char *err, size_t err_size)
{
	char *buf, *b, *e;
	bool priv = false;
	int r = file_read_small(path, TOKEN_MAX, &buf, &priv);

	if (r < 0) {
		snprintf(err, err_size, "cannot read the token file %s: %s", path,
			 r == -EFBIG ? "larger than 4 KiB" : file_strerror(r));
		return r;
	}
	for (b = buf; *b && isspace((unsigned char)*b); b++)
		;
	for (e = b + strlen(b); e > b && isspace((unsigned char)e[-1]); e--)
		;
	for (const char *p = b; p < e; p++)
		if (*p < 0x21 || *p > 0x7e) {
			r = -EINVAL;
			break;
		}
	if (r == 0 && e == b)
		r = -ENODATA;
	if (r < 0) {
		snprintf(err, err_size, "the token file %s %s", path,
			 r == -ENODATA ? "is empty" : "holds characters other than visible ASCII");
		free_secret(buf);
		return r;
	}
	memmove(buf, b, (size_t)(e - b));
	buf[e - b] = 0;
	if (!priv)
		log_warn("token file %s can be read by group or others (chmod 600 it)", path);
	*ret = buf;
	return 0;
}

static int read_pem(const char *what, const char *path, char **ret, char *err, size_t err_size)
{
	int r = file_read_small(path, PEM_MAX, ret, NULL);

	if (r < 0) {
		snprintf(err, err_size, "cannot read the %s %s: %s", what, path,
			 r == -EFBIG ? "larger than 1 MiB" : file_strerror(r));
		return r;
	}
	if (!strstr(*ret, "-----BEGIN ")) {
		snprintf(err, err_size, "the %s %s is not PEM", what, path);
		free_secret(*ret);
		*ret = NULL;
		return -EINVAL;
	}
	return 0;
}

/* ---- addresses ---------------------------------------------------------- */

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is the IPv4 address. */
static void unmap_v4(struct cidr *c)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	if (c->family == AF_INET6 && memcmp(c->addr, prefix, 12) == 0) {
		memmove(c->addr, c->addr + 12, 4);
		memset(c->addr + 4, 0, 12);
		c->family = AF_INET;
		c->prefix = c->prefix >= 96 ? c->prefix - 96 : 0;
	}
}

static int parse_addr(const char *s, struct cidr *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (inet_pton(AF_INET, s, ret->addr) == 1) {
		ret->family = AF_INET;
		ret->prefix = 32;
		return 0;
	}
	if (inet_pton(AF_INET6, s, ret->addr) == 1) {
		ret->family = AF_INET6;
		ret->prefix = 128;
		unmap_v4(ret);
		return 0;
	}
	return -EINVAL;
}

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;

	if (memcmp(a, b, whole) != 0)
		return false;
	return rest == 0 || ((a[whole] ^ b[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

/* "10.0.0.0/8", "fd00::/8", "127.0.0.1" (a single host). Host bits must be 0,
 * so that a typo like 10.1.2.3/8 is caught rather than widened. */
static int parse_cidr(const char *s, struct cidr *ret)
{
	char buf[INET6_ADDRSTRLEN + 8];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	unsigned max;

	if (n == 0 || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = 0;
	if (parse_addr(buf, ret) < 0)
		return -EINVAL;
	max = ret->prefix; /* 32, or 128 (a mapped address was reduced to 32) */
	if (slash) {
		char *end;
		unsigned long p;
		bool mapped = strchr(buf, ':') && ret->family == AF_INET;

		if (!isdigit((unsigned char)slash[1]))
			return -EINVAL;
		errno = 0;
		p = strtoul(slash + 1, &end, 10);
		if (errno || *end || p > (mapped ? 128 : max) || (mapped && p < 96))
			return -EINVAL;
		ret->prefix = mapped ? (unsigned)p - 96 : (unsigned)p;
	}
	/* Host bits: everything after the prefix must be zero. */
	for (unsigned bit = ret->prefix; bit < max; bit++)
		if (ret->addr[bit / 8] & (0x80 >> (bit % 8)))
			return -ERANGE;
	return 0;
}

static const char *cidr_error(int r)
{
	return r == -ERANGE ? "bits are set after the prefix length (write the network address, e.g. 10.0.0.0/8)"
			    : "expected an IPv4 or IPv6 address with an optional /PREFIX";
}

int rpc_allow_from_check(const char *s, char *why, size_t why_size)
{
	struct cidr c;
	int r = parse_cidr(s, &c);

	if (r < 0)
		snprintf(why, why_size, "%s", cidr_error(r));
	return r;
}

/*
 * The peer's address from gRPC's peer string: "ipv4:127.0.0.1:5555",
 * "ipv6:[::1]:5555" (some versions percent-encode the brackets and the
 * zone's '%'). -EINVAL for anything else (a unix socket, garbage).
 */
static int parse_peer(const char *peer, struct cidr *ret)
{
	char buf[128];
	size_t n = 0;
	const char *p;
	char *end;

	if (strncmp(peer, "ipv4:", 5) != 0 && strncmp(peer, "ipv6:", 5) != 0)
		return -EINVAL;
	for (p = peer + 5; *p && n + 1 < sizeof(buf); p++) {
		if (p[0] == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
			char hex[3] = {p[1], p[2], 0};

			buf[n++] = (char)strtoul(hex, NULL, 16);
			p += 2;
		} else {
			buf[n++] = *p;
		}
	}
	if (*p)
		return -EINVAL;
	buf[n] = 0;
	if (buf[0] == '[') {
		end = strchr(buf, ']');
		if (!end)
			return -EINVAL;
		*end = 0;
		memmove(buf, buf + 1, strlen(buf + 1) + 1);
		end = strchr(buf, '%'); /* zone: fe80::1%eth0 */
		if (end)
			*end = 0;
	} else {
		end = strrchr(buf, ':');
		if (!end)
			return -EINVAL;
		*end = 0;
	}
	return parse_addr(buf, ret);
}

static bool allowed(const struct rpc_auth *a, const struct cidr *peer)
{
	for (size_t i = 0; i < a->n_allow; i++)
		if (a->allow[i].family == peer->family &&
		    prefix_match(a->allow[i].addr, peer->addr, a->allow[i].prefix))
			return true;
	return false;
}

/* ---- server ------------------------------------------------------------- */

int rpc_auth_new(const struct rpc_server_auth *a, struct rpc_auth **ret, char *err, size_t err_size)
{
	struct rpc_auth *x;
	int r = 0;

	*ret = NULL;
	if (!a->n_allow_from && !a->tls_cert && !a->tls_key && !a->tls_client_ca && !a->token_file)
		return 0; /* open, as profd always was */
	if (!a->tls_cert != !a->tls_key) {
		snprintf(err, err_size, "--tls-cert and --tls-key go together");
		return -EINVAL;
	}
	if (a->tls_client_ca && !a->tls_cert) {
		snprintf(err, err_size, "--tls-client-ca needs --tls-cert and --tls-key");
		return -EINVAL;
	}
	if (a->n_allow_from > MAX_ALLOW) {
		snprintf(err, err_size, "too many --allow-from ranges (at most %d)", MAX_ALLOW);
		return -E2BIG;
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	for (size_t i = 0; i < a->n_allow_from; i++) {
		r = parse_cidr(a->allow_from[i], &x->allow[i]);
		if (r < 0) {
			snprintf(err, err_size, "--allow-from \"%s\": %s", a->allow_from[i], cidr_error(r));
			goto fail;
		}
		x->n_allow++;
	}
	if (a->tls_cert && ((r = read_pem("certificate", a->tls_cert, &x->cert_pem, err, err_size)) < 0 ||
			    (r = read_pem("key", a->tls_key, &x->key_pem, err, err_size)) < 0))
		goto fail;
	if (a->tls_client_ca &&
	    (r = read_pem("client CA file", a->tls_client_ca, &x->client_ca_pem, err, err_size)) < 0)
		goto fail;
	if (a->token_file) {
		r = read_token(a->token_file, &x->token, err, err_size);
		if (r < 0)
			goto fail;
		x->token_len = strlen(x->token);
	}
	*ret = x;
	return 0;
fail:
	rpc_auth_free(x);
	return r;
}

struct rpc_auth *rpc_auth_free(struct rpc_auth *a)
{
	if (a) {
		free(a->cert_pem);
		free_secret(a->key_pem);
		free(a->client_ca_pem);
		free_secret(a->token);
		free(a);
	}
	return NULL;
}

grpc_server_credentials *rpc_auth_server_credentials(const struct rpc_auth *a)
{
	grpc_ssl_pem_key_cert_pair pair;

	if (!a || !a->cert_pem)
		return grpc_insecure_server_credentials_create();
	pair.private_key = a->key_pem;
	pair.cert_chain = a->cert_pem;
	/* gRPC copies the PEM strings. A bad certificate or key shows up as a
	 * failed grpc_server_add_http2_port(), i.e. at start-up. */
	return grpc_ssl_server_credentials_create_ex(
		a->client_ca_pem, &pair, 1,
		a->client_ca_pem ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
				 : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
		NULL);
}

/* Compare in time that depends only on the expected token's length. */
static bool token_equal(const char *got, size_t got_len, const char *want, size_t want_len)
{
	volatile uint8_t d = got_len != want_len;

	for (size_t i = 0; i < want_len; i++)
		d |= (uint8_t)(want[i] ^ (i < got_len ? got[i] : 0));
	return d == 0;
}

/* Any "authorization: Bearer <token>" that matches. The scheme is
 * case-insensitive (RFC 6750); the token is not. */
static bool has_token(const struct rpc_auth *a, const grpc_metadata_array *md, bool *ret_present)
{
	bool ok = false;

	*ret_present = false;
	for (size_t i = 0; md && i < md->count; i++) {
		const grpc_metadata *m = &md->metadata[i];
		const char *v = (const char *)GRPC_SLICE_START_PTR(m->value);
		size_t len = GRPC_SLICE_LENGTH(m->value);

		if (grpc_slice_str_cmp(m->key, "authorization") != 0)
			continue;
		*ret_present = true;
		if (len < 7 || strncasecmp(v, "Bearer ", 7) != 0)
			continue;
		/* No early exit: every header is compared. */
		ok |= token_equal(v + 7, len - 7, a->token, a->token_len);
	}
	return ok;
}

/* The verified certificate's identity (SAN or CN, as gRPC picks it). */
static char *cert_identity(grpc_call *call)
{
	grpc_auth_context *ctx = grpc_call_auth_context(call);
	grpc_auth_property_iterator it;
	const grpc_auth_property *p;
	char *id = NULL;

	if (!ctx)
		return NULL;
	if (grpc_auth_context_peer_is_authenticated(ctx)) {
		it = grpc_auth_context_peer_identity(ctx);
		p = grpc_auth_property_iterator_next(&it);
		if (p && p->value) {
			size_t n = strnlen(p->value, p->value_length);

			id = malloc(n + sizeof("x509:"));
			if (id) {
				memcpy(id, "x509:", 5);
				memcpy(id + 5, p->value, n);
				id[5 + n] = 0;
			}
		}
	}
	grpc_auth_context_release(ctx);
	return id;
}

static char *ip_identity(const char *peer, const struct cidr *addr, bool have_addr)
{
	char text[INET6_ADDRSTRLEN];
	const char *s = peer;
	char *id;

	if (have_addr && inet_ntop(addr->family, addr->addr, text, sizeof(text)))
		s = text;
	id = malloc(strlen(s) + sizeof("ip:"));
	if (id) {
		memcpy(id, have_addr ? "ip:" : "", have_addr ? 3 : 0);
		strcpy(id + (have_addr ? 3 : 0), s);
	}
	return id;
}

int rpc_auth_check(const struct rpc_auth *a, grpc_call *call, const grpc_metadata_array *md,
		   const char *peer, struct rpc_auth_peer *ret, char *msg, size_t msg_size)
{
	struct cidr addr;
	bool have_addr = parse_peer(peer, &addr) == 0, present;

	memset(ret, 0, sizeof(*ret));
	ret->open = !a;
	if (a && a->client_ca_pem)
		ret->identity = cert_identity(call);
	ret->cert = ret->identity != NULL;
	if (!ret->identity)
		ret->identity = ip_identity(peer, &addr, have_addr);
	if (!a)
		return RPC_OK;

	if (a->n_allow && (!have_addr || !allowed(a, &addr))) {
		snprintf(msg, msg_size, "profd does not accept calls from %s (profd --allow-from)",
			 ret->identity ? ret->identity : "this address");
		return RPC_PERMISSION_DENIED;
	}
	/* gRPC refused the handshake already without a verified certificate;
	 * this catches a certificate that verified but names no identity. */
	if (a->client_ca_pem && !ret->cert) {
		snprintf(msg, msg_size, "profd needs a client certificate signed by its --tls-client-ca");
		return RPC_UNAUTHENTICATED;
	}
	if (a->token) {
		ret->token = has_token(a, md, &present);
		if (!ret->token) {
			snprintf(msg, msg_size, present ? "the bearer token is not valid"
				 : "profd needs a token: send the metadata \"authorization: Bearer <token>\" "
				   "(profctl --token-file)");
			return RPC_UNAUTHENTICATED;
		}
	}
	return RPC_OK;
}

void rpc_auth_peer_clear(struct rpc_auth_peer *p)
{
	free(p->identity);
	memset(p, 0, sizeof(*p));
}

/* ---- client ------------------------------------------------------------- */

/* Process-wide; written by rpc_client_set_auth() before any channel. */
static struct {
	char *ca_pem, *cert_pem, *key_pem;
	char *server_name;
	char *bearer;
} client;

int rpc_client_set_auth(const struct rpc_client_auth *a, char *err, size_t err_size)
{
	char *token = NULL;
	int r;

	if (!a->tls_cert != !a->tls_key) {
		snprintf(err, err_size, "--tls-cert and --tls-key go together");
		return -EINVAL;
	}
	if ((a->tls_cert || a->tls_server_name) && !a->tls_ca) {
		snprintf(err, err_size, "--tls-cert, --tls-key and --tls-server-name need --tls-ca");
		return -EINVAL;
	}
	if ((a->tls_ca && (r = read_pem("CA file", a->tls_ca, &client.ca_pem, err, err_size)) < 0) ||
	    (a->tls_cert && (r = read_pem("certificate", a->tls_cert, &client.cert_pem, err, err_size)) < 0) ||
	    (a->tls_key && (r = read_pem("key", a->tls_key, &client.key_pem, err, err_size)) < 0))
		return r;
	if (a->tls_server_name && !(client.server_name = strdup(a->tls_server_name)))
		return -ENOMEM;
	if (a->token_file) {
		r = read_token(a->token_file, &token, err, err_size);
		if (r < 0)
			return r;
		client.bearer = malloc(strlen(token) + sizeof("Bearer "));
		if (client.bearer)
			sprintf(client.bearer, "Bearer %s", token);
		free_secret(token);
		if (!client.bearer)
			return -ENOMEM;
	}
	return 0;
}

grpc_channel_credentials *rpc_auth_channel_credentials(void)
{
	grpc_ssl_pem_key_cert_pair pair;

	if (!client.ca_pem)
		return grpc_insecure_credentials_create();
	pair.private_key = client.key_pem;
	pair.cert_chain = client.cert_pem;
	return grpc_ssl_credentials_create_ex(client.ca_pem, client.cert_pem ? &pair : NULL, NULL, NULL);
}

const char *rpc_auth_client_server_name(void) { return client.server_name; }
const char *rpc_auth_client_bearer(void) { return client.bearer; }
