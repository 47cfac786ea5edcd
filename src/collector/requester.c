// SPDX-License-Identifier: MIT
/* Who may load probes through the collector: see requester.h. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/auth.h"
#include "collector/collector_int.h"
#include "collector/requester.h"
#include "common/file_atomic.h"
#include "common/log.h"
#include "common/peer.h"
#include "common/rand.h"

#define NGROUPS_MAX_ASK 1024

/* Contract in requester.h. */
int coll_probe_group_set(struct collector *c, const char *name, char *err, size_t errlen)
{
	struct group gr, *res = NULL;
	char buf[16384];
	int ret;

	if (strlen(name) >= sizeof(c->probe_group)) {
		snprintf(err, errlen, "%s: a group name is at most %zu bytes", name,
			 sizeof(c->probe_group) - 1);
		return -EINVAL;
	}
	ret = getgrnam_r(name, &gr, buf, sizeof(buf), &res);
	if (ret || !res) {
		snprintf(err, errlen, "%s: no such group%s%s", name, ret ? ": " : "",
			 ret ? strerror(ret) : "");
		return ret ? -ret : -ENOENT;
	}
	c->probe_gid = gr.gr_gid;
	c->has_probe_group = true;
	snprintf(c->probe_group, sizeof(c->probe_group), "%s", name);
	return 0;
}

/* Is uid a member of gid (its primary group, or listed in /etc/group)? */
static bool in_group(uid_t uid, gid_t gid)
{
	struct passwd pw, *res = NULL;
	gid_t groups[NGROUPS_MAX_ASK];
	int n = NGROUPS_MAX_ASK;
	char buf[16384];

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) || !res)
		return false;
	if (pw.pw_gid == gid)
		return true;
	if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* Contract in requester.h. */
int coll_probe_token_make(struct collector *c, const char *path, char *err, size_t errlen)
{
	unsigned char raw[32];
	char line[65];
	int ret;

	if (strlen(path) >= sizeof(c->probe_token_path)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	ret = rand_bytes(raw, sizeof(raw));
	if (ret) {
		snprintf(err, errlen, "getrandom: %s", strerror(-ret));
		return ret;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(c->probe_token + 2 * i, 3, "%02x", raw[i]);
	memcpy(line, c->probe_token, 64);
	line[64] = '\n';
	ret = file_write_atomic(path, line, sizeof(line), 0600, 0);
	if (ret) {
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		c->probe_token[0] = '\0';
		return ret;
	}
	snprintf(c->probe_token_path, sizeof(c->probe_token_path), "%s", path);
	return 0;
}

/* Is authz "Bearer T" with T the probe token?  In time independent of
 * where a guess differs. */
static bool is_probe_token(const struct collector *c, const char *authz)
{
	const char *t = c->probe_token;
	unsigned diff;
	size_t n;

	if (!t[0] || !authz || strncasecmp(authz, "Bearer ", 7))
		return false;
	authz += 7;
	n = strlen(authz);
	diff = n != 64;
	for (size_t i = 0; i < 64; i++)
		diff |= (unsigned char)t[i] ^ (unsigned char)(i < n ? authz[i] : 0);
	return !diff;
}

/* Contract in requester.h. */
void coll_requester_decide(const struct collector *c, int fd, const char *authz,
			   struct coll_requester *r)
{
	char name[128];
	uid_t uid;

	memset(r, 0, sizeof(*r));
	if (auth_on(c->auth)) {
		/* http_screen() let it through: a token with the probe scope */
		size_t n = authz ? strlen(authz) : 0;
		const struct auth_token *tok = n > 7 ? auth_find(c->auth, authz + 7, n - 7) : NULL;

		r->right = COLL_PROBE_ALL;
		snprintf(r->who, sizeof(r->who), "token %s", tok && tok->name[0] ? tok->name :
			 "(unnamed)");
		return;
	}
	if (is_probe_token(c, authz)) {
		r->right = COLL_PROBE_ALL;
		snprintf(r->who, sizeof(r->who), "the holder of the probe token (%.200s)",
			 c->probe_token_path);
		return;
	}
	if (fd < 0 || peer_uid(fd, &uid, r->why, sizeof(r->why))) {
		r->right = COLL_PROBE_NONE;
		snprintf(r->who, sizeof(r->who), "a peer whose user is unknown");
		if (fd < 0)
			snprintf(r->why, sizeof(r->why), "no socket to ask");
		return;
	}
	peer_uid_name(uid, name, sizeof(name));
	r->uid = uid;
	if (uid == 0 || uid == getuid()) {
		r->right = COLL_PROBE_ALL;
		snprintf(r->who, sizeof(r->who), "%s%s", name, uid ? ", the collector's user" : "");
	} else if (c->has_probe_group && in_group(uid, c->probe_gid)) {
		r->right = COLL_PROBE_ALL;
		snprintf(r->who, sizeof(r->who), "%s, of group %s (--probe-group)", name,
			 c->probe_group);
	} else {
		r->right = COLL_PROBE_OWN;
		snprintf(r->who, sizeof(r->who), "%s", name);
	}
}

/* The ways to more rights, for a refusal's message. */
#define MORE "root, the collector's user, a member of its --probe-group, the holder of " \
	     "its probe token (the file DB.probe-token) or of a token with the probe scope " \
	     "(--token-file) may"

/* Contract in requester.h. */
unsigned coll_requester_admit(const struct coll_requester *r, const char *what, int kind,
			      bool cluster, char *msg, size_t msglen)
{
	const char *src = kind >= 0 ? src_kind_name((enum src_kind)kind) : NULL;

	msg[0] = '\0';
	switch (r->right) {
	case COLL_PROBE_ALL:
		pr_info("probe access: %s by %s: allowed", what, r->who);
		return 0;
	case COLL_PROBE_NONE:
		snprintf(msg, msglen, "%s refused: it loads probes, and the requester is not "
			 "known: %s; without tokens only a local user may, under the rules of "
			 "fay collector --help (ACCESS)\n", what, r->why);
		break;
	case COLL_PROBE_OWN:
		if (kind < 0)
			snprintf(msg, msglen, "%s refused for %s: a standing query runs on every "
				 "agent; " MORE "\n", what, r->who);
		else if (cluster)
			snprintf(msg, msglen, "%s refused for %s: a cluster query loads probes on "
				 "every agent, where this user means nothing; " MORE "\n", what,
				 r->who);
		else if (kind != SRC_UFUNC && kind != SRC_PFUNC && kind != SRC_USDT)
			snprintf(msg, msglen, "%s refused for %s: a %s source sees every process "
				 "(or the kernel), and a user other than root probes only its own "
				 "processes: process(PID).function(...) of one of them, or "
				 "function/usdt(\"BIN:...\") of a binary it owns; " MORE "\n", what,
				 r->who, src);
		else {
			pr_info("probe access: %s by %s: allowed, its own processes only", what,
				r->who);
			return 0;
		}
		break;
	}
	pr_info("probe access: %s by %s: %.*s", what, r->who,
		(int)strcspn(msg, "\n"), msg);
	return 403;
}
