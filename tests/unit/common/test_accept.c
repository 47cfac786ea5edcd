// SPDX-License-Identifier: MIT
/*
 * The one accept module (common/accept.c) on real sockets: a connection
 * accepted with its peer's address; admission in its order (stopping,
 * max_conns, max_per_peer, then the budget, a refusal there counted in
 * *busy and taking nothing); leave gives the memory back; stop shuts the
 * reading side of every connection listed; wait_idle returns once the
 * last one left.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/accept.h"
#include "common/budget.h"
#include "common/net.h"
#include "test.h"

static struct sockaddr_storage where;

static int dial(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&where, sizeof(struct sockaddr_in))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Accept the next connection (dialled first) into k. */
static int next(struct acceptor *a, struct acc_conn *k, int *client)
{
	*client = dial();
	return *client < 0 ? -1 : acceptor_accept(a, k);
}

static void *leave_later(void *arg)
{
	struct acceptor *a = arg;

	usleep(20000);
	acceptor_leave(a, a->conns);
	return NULL;
}

int main(void)
{
	struct mem_budget b = { .max = 3000 };
	uint64_t busy = 0;
	struct acceptor a = { .max_conns = 3, .max_per_peer = 2, .budget = &b, .conn_mem = 1000,
			      .busy = &busy };
	struct acc_conn k[6];
	int c[6], lfd;
	char err[256], buf[4];
	pthread_t t;

	lfd = net_listen("127.0.0.1:0", 16, &where, err, sizeof(err));
	if (lfd < 0)
		skip_all("cannot listen on 127.0.0.1: %s", err);
	a.fd = lfd;
	acceptor_init(&a);

	is_int(next(&a, &k[0], &c[0]), 0, "a connection accepted");
	is_str(k[0].ip, "127.0.0.1", "its peer's address");
	ok(strncmp(k[0].peer, "127.0.0.1:", 10) == 0, "and with its port: %s", k[0].peer);
	is_int(acceptor_admit(&a, &k[0]), ACC_IN, "admitted");
	is_u64(b.used, 1000, "its memory taken from the budget");
	next(&a, &k[1], &c[1]);
	is_int(acceptor_admit(&a, &k[1]), ACC_IN, "a second from the same address: admitted");
	next(&a, &k[2], &c[2]);
	is_int(acceptor_admit(&a, &k[2]), ACC_PEER, "a third from it: over max_per_peer");
	a.max_per_peer = 0;
	b.max = 2500;
	is_int(acceptor_admit(&a, &k[2]), ACC_BUSY, "without the per-peer limit, over the budget: busy");
	is_u64(busy, 1, "counted in *busy");
	is_u64(b.used, 2000, "nothing taken by the refusal");
	b.max = 3000;
	is_int(acceptor_admit(&a, &k[2]), ACC_IN, "with room in the budget: admitted");
	next(&a, &k[3], &c[3]);
	b.max = 1;
	is_int(acceptor_admit(&a, &k[3]), ACC_FULL, "max_conns open: full, checked before the budget");
	is_int((int)a.n, 3, "three listed");

	acceptor_leave(&a, &k[1]);
	is_int((int)a.n, 2, "one left");
	is_u64(b.used, 2000, "its memory given back");
	close(k[1].fd);

	acceptor_stop(&a);
	is_int(acceptor_admit(&a, &k[3]), ACC_STOPPING, "after stop: nothing admitted");
	is_int((int)recv(k[0].fd, buf, sizeof(buf), 0), 0,
	       "stop shut the reading side of a connection listed");
	is_int((int)recv(k[2].fd, buf, sizeof(buf), 0), 0, "and of the other");

	acceptor_leave(&a, &k[0]);
	pthread_create(&t, NULL, leave_later, &a);
	acceptor_wait_idle(&a);
	is_int((int)a.n, 0, "wait_idle returned once the last one left");
	is_u64(b.used, 0, "every byte given back");
	pthread_join(t, NULL);

	shutdown(lfd, SHUT_RDWR);
	ok(acceptor_accept(&a, &k[4]) < 0 && acceptor_accept(&a, &k[4]) != -EAGAIN,
	   "a listening socket shut down: an error that ends the loop");
	acceptor_destroy(&a);
	for (int i = 0; i < 4; i++)
		close(c[i]);
	close(k[0].fd);
	close(k[2].fd);
	close(k[3].fd);
	close(lfd);
	return test_done();
}
