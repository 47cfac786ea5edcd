// SPDX-License-Identifier: MIT
/*
 * A traced process for the agent tests: records spans with libfay and
 * writes the id of every span it ended to a file, so a test can check that
 * exactly those spans reached the collector.
 *
 *   span_producer --count N [--ids FILE] [--threads T] [--rate R]
 *                 [--service NAME] [--ready FILE] [--hold FILE]
 *                 [--open-span] [--batch-sleep-ms MS]
 *
 * --ready FILE   created once all spans are ended (and --open-span begun)
 * --hold FILE    before exiting, wait until FILE exists
 * --open-span    begin one more span "open-span" and never end it
 * --rate R       about R spans per second per thread (0: flat out)
 * --keep-going   run on when fay_init() fails (prints its error), as an
 *                application must: context still flows, nothing recorded
 * --names A,B,.. name the spans A, B, ... in turn (default span-T-I: the
 *                thread and the span's number)
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fay/trace.h>

static long count = 100, rate;
static int nthreads = 1;
static FILE *ids;
static char *names[16];
static int nnames;
static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;

static void sleep_ns(long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void *run(void *arg)
{
	long t = (long)(intptr_t)arg;
	long per = count / nthreads + (t < count % nthreads ? 1 : 0);
	char (*buf)[17] = calloc((size_t)per, 17);

	for (long i = 0; i < per; i++) {
		char name[64], tp[FAY_TRACEPARENT_LEN];
		struct fay_span *s;

		if (nnames)
			snprintf(name, sizeof(name), "%s", names[i % nnames]);
		else
			snprintf(name, sizeof(name), "span-%ld-%ld", t, i);
		s = fay_span_root(name);
		fay_span_tag(s, "thread", "producer");
		fay_span_tag_int(s, "i", i);
		fay_span_event(s, "work");
		if (fay_span_traceparent(s, tp, sizeof(tp)) > 0 && buf)
			memcpy(buf[i], tp + 36, 16);
		fay_span_end(s);
		if (rate)
			sleep_ns(1000000000L / rate);
	}
	if (ids && buf) {
		pthread_mutex_lock(&ids_lock);
		for (long i = 0; i < per; i++)
			fprintf(ids, "%.16s\n", buf[i]);
		pthread_mutex_unlock(&ids_lock);
	}
	free(buf);
	return NULL;
}

static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (fd >= 0)
		close(fd);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "ids", required_argument, NULL, 'i' },
		{ "threads", required_argument, NULL, 't' },
		{ "rate", required_argument, NULL, 'r' },
		{ "service", required_argument, NULL, 's' },
		{ "ready", required_argument, NULL, 'R' },
		{ "hold", required_argument, NULL, 'H' },
		{ "open-span", no_argument, NULL, 'o' },
		{ "keep-going", no_argument, NULL, 'k' },
		{ "names", required_argument, NULL, 'N' },
		{ 0 },
	};
	const char *service = "producer", *ready = NULL, *hold = NULL;
	pthread_t th[64];
	int c, open_span = 0, keep_going = 0, err;

	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (c) {
		case 'n': count = atol(optarg); break;
		case 'i':
			ids = fopen(optarg, "w");
			if (!ids) {
				perror(optarg);
				return 1;
			}
			break;
		case 't': nthreads = atoi(optarg); break;
		case 'r': rate = atol(optarg); break;
		case 's': service = optarg; break;
		case 'R': ready = optarg; break;
		case 'H': hold = optarg; break;
		case 'o': open_span = 1; break;
		case 'k': keep_going = 1; break;
		case 'N':
			for (char *sv = NULL, *n = strtok_r(optarg, ",", &sv); n && nnames < 16;
			     n = strtok_r(NULL, ",", &sv))
				names[nnames++] = n;
			break;
		default:
			fprintf(stderr, "usage: span_producer --count N [--ids FILE] [--threads T] "
				"[--rate R] [--service S] [--ready FILE] [--hold FILE] [--open-span] [--keep-going]"
				" [--names A,B,...]\n");
			return 2;
		}
	}
	if (nthreads < 1 || nthreads > 64)
		nthreads = 1;
	err = fay_init(service, "127.0.0.1", 4242);
	if (err) {
		fprintf(stderr, "span_producer: fay_init: %s\n", strerror(-err));
		if (!keep_going)
			return 1;
	}
	for (long t = 0; t < nthreads; t++)
		pthread_create(&th[t], NULL, run, (void *)(intptr_t)t);
	for (int t = 0; t < nthreads; t++)
		pthread_join(th[t], NULL);
	if (ids)
		fclose(ids);
	if (open_span)
		fay_span_root("open-span"); /* never ended */
	if (ready)
		touch(ready);
	if (hold)
		while (access(hold, F_OK))
			sleep_ns(10 * 1000000L);
	return 0;
}
