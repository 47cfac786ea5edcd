// SPDX-License-Identifier: MIT
/* The CLI's requests to the collector's HTTP API with libcurl (`fay
 * traces`, `fay query --cluster --keep/--drop`). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/traces.h"
#include "common/lazy_curl.h"

/* Responses larger than this are refused rather than buffered. */
#define TR_HTTP_MAX_BODY (256u << 20)

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct tr_http_resp *r = arg;
	size_t add = size * n;
	char *nb;

	if (r->len + add + 1 > TR_HTTP_MAX_BODY)
		return 0;
	nb = realloc(r->body, r->len + add + 1);
	if (!nb)
		return 0;
	memcpy(nb + r->len, p, add);
	r->len += add;
	nb[r->len] = '\0';
	r->body = nb;
	return add;
}

static int curl_errno(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return -EINVAL;
	case CURLE_WRITE_ERROR:
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

/* tr_http_auth()'s: the token of requests that name none; the CA. */
static const char *default_token, *ca_file, *cert_file, *key_file;

void tr_http_auth(const char *token)
{
	default_token = token;
}

void tr_http_set_ca(const char *path)
{
	ca_file = path;
}

/* The option's value, else the environment's (NULL: neither). */
static const char *opt_or_env(const char *opt, const char *var)
{
	const char *env = getenv(var);

	return opt ? opt : env && *env ? env : NULL;
}

const char *tr_http_ca(void)
{
	return opt_or_env(ca_file, "FAY_TLS_CA");
}

void tr_http_set_cert(const char *cert, const char *key)
{
	cert_file = cert;
	key_file = key;
}

void tr_http_tls(void *c)
{
	const char *cert = opt_or_env(cert_file, "FAY_TLS_CERT");
	const char *key = opt_or_env(key_file, "FAY_TLS_KEY");

	if (tr_http_ca())	/* https://: the collector's certificate is checked against it */
		curl_easy_setopt(c, CURLOPT_CAINFO, tr_http_ca());
	if (cert)		/* for a collector with --tls-client-ca */
		curl_easy_setopt(c, CURLOPT_SSLCERT, cert);
	if (key)
		curl_easy_setopt(c, CURLOPT_SSLKEY, key);
}

int tr_http_get(const char *url, struct tr_http_resp *resp,
		char *err, size_t errlen)
{
	return tr_http(NULL, url, NULL, default_token, resp, err, errlen);
}

int tr_http(const char *method, const char *url, const char *body, const char *token,
	    struct tr_http_resp *resp, char *err, size_t errlen)
{
	char ebuf[CURL_ERROR_SIZE] = "", auth[600];
	struct curl_slist *hdr = NULL;
	CURL *c;
	CURLcode rc;

	memset(resp, 0, sizeof(*resp));
	if (lazy_curl_load(err, errlen))
		return -ELIBACC;
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		snprintf(err, errlen, "libcurl failed to initialise");
		return -EIO;
	}
	c = curl_easy_init();
	if (!c) {
		snprintf(err, errlen, "libcurl failed to initialise");
		curl_global_cleanup();
		return -ENOMEM;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	tr_http_tls(c);
	if (method)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	}
	if (token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		hdr = curl_slist_append(hdr, auth);
	}
	if (hdr)
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(c, CURLOPT_USERAGENT, "fay-traces");
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
		if (!resp->body)
			resp->body = calloc(1, 1);
	} else {
		snprintf(err, errlen, "%s", *ebuf ? ebuf : curl_easy_strerror(rc));
		free(resp->body);
		resp->body = NULL;
		resp->len = 0;
	}
	curl_easy_cleanup(c);
	curl_slist_free_all(hdr);
	curl_global_cleanup();
	if (rc != CURLE_OK)
		return curl_errno(rc);
	if (!resp->body) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

int tr_http_to_stdout(const char *method, const char *url, const char *body,
		      const char *token, const char *shown, bool missing2)
{
	struct tr_http_resp resp = { 0 };
	char err[512];
	long st;

	if (tr_http(method, url, body, token, &resp, err, sizeof(err))) {
		fprintf(stderr, "error: %s: %s\n", shown, err);
		free(resp.body);
		return 1;
	}
	st = resp.status;
	if (st != 200) {
		fprintf(stderr, "error: %s: HTTP %ld: %s", shown, st, resp.body ? resp.body : "\n");
		free(resp.body);
		return st == 400 || st == 403 || (missing2 && st == 404) ? 2 : 1;
	}
	fwrite(resp.body, 1, resp.len, stdout);
	free(resp.body);
	return fflush(stdout) ? 1 : 0;
}
