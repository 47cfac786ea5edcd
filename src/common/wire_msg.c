// SPDX-License-Identifier: MIT
/*
 * The frames whose payload is a JSON object: HELLO, WELCOME, ACK, NACK,
 * ERROR, STATS (src/common/wire.h, docs/ABI.md).  Decoders accept an
 * object with the documented members of the documented JSON types and
 * sizes (unknown members are ignored, so a newer peer may add some), and
 * name the first member that is wrong.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire.h"

__attribute__((format(printf, 3, 4)))
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

/* Encode o (reference stolen) as the payload of a frame.  o NULL: the
 * json_pack() building it failed, which with our formats means a string
 * that is not UTF-8 (or no memory). */
static int put_json(struct wire_buf *b, unsigned type, uint64_t seq, json_t *o)
{
	char *s;
	int ret;

	if (!o)
		return -EINVAL;
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return -ENOMEM;
	ret = wire_put_frame(b, type, seq, s, (uint32_t)strlen(s));
	free(s);
	return ret;
}

/*
 * The frame's payload as a JSON object, after checking the frame type and
 * its seq (want_seq: 1 = must be >= 1, 0 = must be 0).  NULL with the
 * return code in *ret and the reason in err.
 */
static json_t *get_json(const struct wire_frame *f, unsigned type, int want_seq,
			int *ret, char *err, size_t errlen)
{
	const char *name = wire_type_name(type);
	json_error_t je;
	json_t *o;

	if (f->h.type != type) {
		snprintf(err, errlen, "expected a %s frame, got %s (type %u)", name,
			 wire_type_name(f->h.type), f->h.type);
		*ret = -EPROTO;
		return NULL;
	}
	if (want_seq ? !f->h.seq : !!f->h.seq) {
		snprintf(err, errlen, "%s: header seq %llu (%s)", name,
			 (unsigned long long)f->h.seq, want_seq ? "must be at least 1" : "must be 0");
		*ret = -EPROTO;
		return NULL;
	}
	o = json_loadb((const char *)f->payload, f->h.len,
		       JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (!o) {
		*ret = bad(err, errlen, "%s: payload is not JSON: byte %d: %s", name,
			   je.position, je.text);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		*ret = bad(err, errlen, "%s: payload is not a JSON object", name);
		return NULL;
	}
	*ret = 0;
	return o;
}

/* Copy string member key of o into out[size]: required or not.  0 (absent
 * and optional: out = ""), or -EBADMSG. */
static int get_str(json_t *o, const char *frame, const char *key, int required,
		   char *out, size_t size, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key);
	size_t n;

	out[0] = '\0';
	if (!v)
		return required ? bad(err, errlen, "%s: \"%s\" is missing", frame, key) : 0;
	if (!json_is_string(v))
		return bad(err, errlen, "%s: \"%s\" is not a string", frame, key);
	n = json_string_length(v);
	if (n >= size)
		return bad(err, errlen, "%s: \"%s\" is %zu bytes long, at most %zu", frame, key,
			   n, size - 1);
	if (memchr(json_string_value(v), '\0', n))
		return bad(err, errlen, "%s: \"%s\" contains a NUL byte", frame, key);
	memcpy(out, json_string_value(v), n + 1);
	return 0;
}

static int get_u64(json_t *o, const char *frame, const char *key, uint64_t *out,
		   char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return bad(err, errlen, "%s: \"%s\" is missing", frame, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return bad(err, errlen, "%s: \"%s\" is not an integer >= 0", frame, key);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* ---- HELLO --------------------------------------------------------------- */

int wire_put_hello(struct wire_buf *b, const struct wire_hello *m)
{
	json_t *o = json_pack("{ssssss}", "agent_id", m->agent_id, "host", m->host,
			      "version", m->version);

	if (o && ((m->token[0] && json_object_set_new(o, "token", json_string(m->token))) ||
		  (m->role[0] && json_object_set_new(o, "role", json_string(m->role))) ||
		  (m->collector && json_object_set_new(o, "collector", json_true())) ||
		  (m->kernel[0] && json_object_set_new(o, "kernel", json_string(m->kernel))) ||
		  (m->btf >= 0 && m->role[0] &&
		   json_object_set_new(o, "btf", json_boolean(m->btf))) ||
		  (m->capture && json_object_set_new(o, "capture", json_true())) ||
		  (m->session[0] && json_object_set_new(o, "session", json_string(m->session))))) {
		json_decref(o);
		return -ENOMEM;
	}
	return put_json(b, WIRE_HELLO, 0, o);
}

int wire_get_hello(const struct wire_frame *f, struct wire_hello *m,
		   char *err, size_t errlen)
{
	int ret;
	json_t *o = get_json(f, WIRE_HELLO, 0, &ret, err, errlen);

	if (!o)
		return ret;
	ret = get_str(o, "HELLO", "agent_id", 1, m->agent_id, sizeof(m->agent_id), err, errlen);
	if (!ret && (strlen(m->agent_id) != WIRE_ID_LEN ||
		     strspn(m->agent_id, "0123456789abcdefABCDEF") != WIRE_ID_LEN))
		ret = bad(err, errlen, "HELLO: \"agent_id\" must be %d hex digits", WIRE_ID_LEN);
	if (!ret)
		for (int i = 0; i < WIRE_ID_LEN; i++)
			m->agent_id[i] = (char)(m->agent_id[i] | 0x20); /* lower case */
	if (!ret)
		ret = get_str(o, "HELLO", "host", 0, m->host, sizeof(m->host), err, errlen);
	if (!ret)
		ret = get_str(o, "HELLO", "version", 0, m->version, sizeof(m->version), err, errlen);
	if (!ret)
		ret = get_str(o, "HELLO", "token", 0, m->token, sizeof(m->token), err, errlen);
	if (!ret)
		ret = get_str(o, "HELLO", "role", 0, m->role, sizeof(m->role), err, errlen);
	if (!ret)
		ret = get_str(o, "HELLO", "kernel", 0, m->kernel, sizeof(m->kernel), err, errlen);
	m->btf = -1;
	if (!ret && json_object_get(o, "btf")) {
		if (!json_is_boolean(json_object_get(o, "btf")))
			ret = bad(err, errlen, "HELLO: \"btf\" is not true or false");
		else
			m->btf = json_is_true(json_object_get(o, "btf"));
	}
	if (!ret)
		ret = get_str(o, "HELLO", "session", 0, m->session, sizeof(m->session), err,
			      errlen);
	m->capture = 0;
	if (!ret && json_object_get(o, "capture")) {
		if (!json_is_boolean(json_object_get(o, "capture")))
			ret = bad(err, errlen, "HELLO: \"capture\" is not true or false");
		else
			m->capture = json_is_true(json_object_get(o, "capture"));
	}
	m->collector = 0;
	if (!ret && json_object_get(o, "collector")) {
		json_t *v = json_object_get(o, "collector");

		if (!json_is_boolean(v))
			ret = bad(err, errlen, "HELLO: \"collector\" is not true or false");
		else
			m->collector = json_is_true(v);
	}
	json_decref(o);
	return ret;
}

/* ---- WELCOME ------------------------------------------------------------- */

int wire_put_welcome(struct wire_buf *b, const struct wire_welcome *m)
{
	if (m->last_seq > (uint64_t)INT64_MAX)
		return -EINVAL;
	return put_json(b, WIRE_WELCOME, 0,
			json_pack("{sssI}", "version", m->version, "last_seq",
				  (json_int_t)m->last_seq));
}

int wire_get_welcome(const struct wire_frame *f, struct wire_welcome *m,
		     char *err, size_t errlen)
{
	int ret;
	json_t *o = get_json(f, WIRE_WELCOME, 0, &ret, err, errlen);

	if (!o)
		return ret;
	ret = get_str(o, "WELCOME", "version", 0, m->version, sizeof(m->version), err, errlen);
	if (!ret)
		ret = get_u64(o, "WELCOME", "last_seq", &m->last_seq, err, errlen);
	json_decref(o);
	return ret;
}

/* ---- ACK ----------------------------------------------------------------- */

int wire_put_ack(struct wire_buf *b, const struct wire_ack *m)
{
	if (!m->seq || m->stored > (uint64_t)INT64_MAX ||
	    m->rejected > (uint64_t)INT64_MAX)
		return -EINVAL;
	return put_json(b, WIRE_ACK, m->seq,
			json_pack("{sIsbsI}", "stored", (json_int_t)m->stored,
				  "duplicate", m->duplicate, "rejected", (json_int_t)m->rejected));
}

int wire_get_ack(const struct wire_frame *f, struct wire_ack *m,
		 char *err, size_t errlen)
{
	int ret;
	json_t *o = get_json(f, WIRE_ACK, 1, &ret, err, errlen);
	json_t *d;

	if (!o)
		return ret;
	m->seq = f->h.seq;
	ret = get_u64(o, "ACK", "stored", &m->stored, err, errlen);
	if (!ret)
		ret = get_u64(o, "ACK", "rejected", &m->rejected, err, errlen);
	if (!ret) {
		d = json_object_get(o, "duplicate");
		if (!json_is_boolean(d))
			ret = bad(err, errlen, "ACK: \"duplicate\" is %s", d ? "not true or false" : "missing");
		else
			m->duplicate = json_is_true(d);
	}
	json_decref(o);
	return ret;
}

/* ---- NACK, ERROR ---------------------------------------------------------- */

/*
 * A reason as valid UTF-8: it may quote what a peer sent or be cut by
 * snprintf inside a character, and a reason that cannot be sent would
 * leave the peer guessing.  Bytes that do not form a character (RFC 3629:
 * no overlongs, no surrogates, nothing above U+10FFFF) become '?'.
 */
static void utf8_clean(const char *in, char *out, size_t size)
{
	const unsigned char *p = (const unsigned char *)in;
	size_t o = 0;

	while (*p && o + 1 < size) {
		unsigned c = *p, n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 :
				     (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 4;
		unsigned cp = n == 0 ? c : n == 1 ? c & 0x1f : n == 2 ? c & 0x0f : c & 0x07;
		unsigned i;

		for (i = 1; i <= n && n < 4 && (p[i] & 0xc0) == 0x80; i++)
			cp = cp << 6 | (p[i] & 0x3f);
		if (n == 4 || i <= n || (n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
		    (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || o + n + 1 >= size) {
			out[o++] = '?';
			p++;
			continue;
		}
		memcpy(out + o, p, n + 1);
		o += n + 1;
		p += n + 1;
	}
	out[o] = '\0';
}

int wire_put_nack(struct wire_buf *b, const struct wire_nack *m)
{
	char why[sizeof(m->error)];

	if (!m->seq)
		return -EINVAL;
	utf8_clean(m->error, why, sizeof(why));
	return put_json(b, WIRE_NACK, m->seq, json_pack("{ss}", "error", why));
}

int wire_get_nack(const struct wire_frame *f, struct wire_nack *m,
		  char *err, size_t errlen)
{
	int ret;
	json_t *o = get_json(f, WIRE_NACK, 1, &ret, err, errlen);

	if (!o)
		return ret;
	m->seq = f->h.seq;
	ret = get_str(o, "NACK", "error", 1, m->error, sizeof(m->error), err, errlen);
	json_decref(o);
	return ret;
}

int wire_put_error(struct wire_buf *b, const struct wire_error *m)
{
	char why[sizeof(m->error)];

	utf8_clean(m->error, why, sizeof(why));
	return put_json(b, WIRE_ERROR, 0, json_pack("{ss}", "error", why));
}

int wire_get_error(const struct wire_frame *f, struct wire_error *m,
		   char *err, size_t errlen)
{
	int ret;
	json_t *o = get_json(f, WIRE_ERROR, 0, &ret, err, errlen);

	if (!o)
		return ret;
	ret = get_str(o, "ERROR", "error", 1, m->error, sizeof(m->error), err, errlen);
	json_decref(o);
	return ret;
}

/* ---- STATS --------------------------------------------------------------- */

int wire_put_stats(struct wire_buf *b, const struct wire_stats *m)
{
	if (m->len > FAY_WIRE_MAX_PAYLOAD)
		return -EMSGSIZE;
	return wire_put_frame(b, WIRE_STATS, 0, m->json, (uint32_t)m->len);
}

int wire_get_stats(const struct wire_frame *f, struct wire_stats *m,
		   char *err, size_t errlen)
{
	int ret;
	json_t *o = get_json(f, WIRE_STATS, 0, &ret, err, errlen);

	m->json = NULL;
	m->len = 0;
	if (!o)
		return ret;
	m->json = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!m->json) {
		snprintf(err, errlen, "STATS: out of memory");
		return -ENOMEM;
	}
	m->len = strlen(m->json);
	return 0;
}

void wire_stats_release(struct wire_stats *m)
{
	if (!m)
		return;
	free(m->json);
	m->json = NULL;
	m->len = 0;
}
