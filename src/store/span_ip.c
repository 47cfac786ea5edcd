// SPDX-License-Identifier: MIT
/*
 * Endpoint addresses as Zipkin reads and writes them (zipkin2.Endpoint's
 * parseIp() and its IPv6 writer): zs_ep_set_ip() from text, as the JSON
 * API and span records carry them, zs_ep_set_ip_bytes() from the 4 or 16
 * bytes of the protobuf encoding.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store/span.h"

/* Is ip[0..len) a dotted quad as inet_pton() takes it (four decimal
 * numbers 0..255 without leading zeros)?  Then it is also the text
 * inet_ntop() would give back. */
static int is_dotted_quad(const char *ip, size_t len)
{
	unsigned parts = 0, v = 0, digits = 0;

	for (size_t i = 0; i <= len; i++) {
		if (i == len || ip[i] == '.') {
			if (!digits || ++parts > 4)
				return 0;
			v = digits = 0;
		} else if (ip[i] >= '0' && ip[i] <= '9') {
			if (digits && !v)
				return 0; /* leading zero */
			v = v * 10 + (unsigned)(ip[i] - '0');
			if (v > 255 || ++digits > 3)
				return 0;
		} else {
			return 0;
		}
	}
	return parts == 4;
}

/*
 * IPv6 text as Zipkin writes it (zipkin2.Endpoint's writer): lower-case
 * hex groups without leading zeros, the longest run of zero groups that
 * ends before the last group written "::" (the first such run on a tie, a
 * run of one group too), a trailing run only when there is no other, "::"
 * for all zeros.  Embedded IPv4 is never written in dotted form.
 */
static void ipv6_text(const unsigned char b[16], char *out, size_t outlen)
{
	int best = -1, best_len = 0, run = -1, all_zero = 1;
	size_t n = 0;

	for (int g = 0; g < 8; g++) {
		if (!b[2 * g] && !b[2 * g + 1]) {
			if (run < 0)
				run = g;
			continue;
		}
		all_zero = 0;
		if (run >= 0 && g - run > best_len) {
			best = run;
			best_len = g - run;
		}
		run = -1;
	}
	if (all_zero) {
		snprintf(out, outlen, "::");
		return;
	}
	if (best < 0 && run >= 0) {
		best = run;
		best_len = 8 - run;
	}
	for (int g = 0; g < 8 && n + 6 < outlen;) {
		if (g == best) {
			out[n++] = ':';
			g += best_len;
			if (g == 8)
				out[n++] = ':';
			continue;
		}
		if (g)
			out[n++] = ':';
		n += (size_t)snprintf(out + n, outlen - n, "%x",
				      (unsigned)b[2 * g] << 8 | b[2 * g + 1]);
		g++;
	}
	out[n] = '\0';
}

/* Is ip[0..len) "::a.b.c.d", or "::" + four of [0fF] + ":a.b.c.d" (an
 * IPv4-compatible or -mapped address written with dots)?  Then *v4 points
 * at the dotted quad (zipkin2.Endpoint's detectFamily(): IPv4Embedded). */
static int embedded_v4(const char *ip, size_t len, const char **v4)
{
	const char *colon = NULL;

	for (size_t i = 0; i < len; i++)
		if (ip[i] == ':')
			colon = ip + i;
	if (!colon || len < 3 || ip[0] != ':' || ip[1] != ':')
		return 0;
	if (colon - ip != 1 && colon - ip != 6)
		return 0;
	for (const char *c = ip + 2; c < colon; c++)
		if (*c != '0' && *c != 'f' && *c != 'F')
			return 0;
	*v4 = colon + 1;
	return is_dotted_quad(*v4, len - (size_t)(*v4 - ip));
}

int zs_ep_set_ip(struct zs_endpoint *e, const char *ip, size_t len)
{
	unsigned char b[16];
	const char *v4;
	char txt[64];

	if (len < sizeof(e->ipv4) && is_dotted_quad(ip, len)) {
		memcpy(e->ipv4, ip, len);
		e->ipv4[len] = '\0';
		return 0;
	}
	if (embedded_v4(ip, len, &v4)) {
		len -= (size_t)(v4 - ip);
		memcpy(e->ipv4, v4, len);
		e->ipv4[len] = '\0';
		return 0;
	}
	if (!len || len >= sizeof(txt) || !memchr(ip, ':', len) || memchr(ip, '.', len))
		return -EINVAL;
	memcpy(txt, ip, len);
	txt[len] = '\0';
	if (inet_pton(AF_INET6, txt, b) != 1)
		return -EINVAL;
	ipv6_text(b, e->ipv6, sizeof(e->ipv6));
	return 0;
}

int zs_ep_set_ip_bytes(struct zs_endpoint *e, const unsigned char *ip, size_t len)
{
	static const unsigned char zero12[12];

	if (len == 4) {
		snprintf(e->ipv4, sizeof(e->ipv4), "%u.%u.%u.%u", ip[0], ip[1], ip[2], ip[3]);
		return 0;
	}
	if (len != 16)
		return -EINVAL;
	/* IPv4-compatible (12 zero bytes), but not ::1 */
	if (!memcmp(ip, zero12, 12) && !(!ip[12] && !ip[13] && !ip[14] && ip[15] == 1))
		return zs_ep_set_ip_bytes(e, ip + 12, 4);
	ipv6_text(ip, e->ipv6, sizeof(e->ipv6));
	return 0;
}
