// SPDX-License-Identifier: MIT
/*
 * include/fay/trace.h and blkin.h from C++ (-std=c++11 -pedantic), linked
 * against libfay.so.  Run by tests/unit/lib/test_linked.c: prints the
 * traceparent of the remote span it recorded.
 */
#include <cstdio>
#include <string>

#include <fay/blkin.h>
#include <fay/trace.h>

namespace {

// RAII, the way a C++ program would wrap a span.
class Span {
public:
	explicit Span(const char *name) : s_(fay_span_root(name)) {}
	Span(const std::string &tp, const char *name)
		: s_(fay_span_remote(tp.c_str(), name)) {}
	~Span() { fay_span_end(s_); }
	Span(const Span &) = delete;
	Span &operator=(const Span &) = delete;
	void tag(const char *k, const char *v) { fay_span_tag(s_, k, v); }
	std::string traceparent() const
	{
		char buf[FAY_TRACEPARENT_LEN];

		return fay_span_traceparent(s_, buf, sizeof(buf)) > 0 ? buf : "";
	}

private:
	struct fay_span *s_;
};

} // namespace

int main()
{
	if (fay_init("compile-cc", nullptr, 0) != 0)
		return 1;
	std::string tp;
	{
		Span client("c++ client");
		client.tag("lang", "c++");
		Span server(client.traceparent(), "c++ server");
		tp = server.traceparent();
	}
	struct blkin_endpoint ep;
	struct blkin_trace t;
	blkin_init_endpoint(&ep, "::1", 1, "compile-cc");
	blkin_init_new_trace(&t, "c++ blkin", &ep);
	BLKIN_TIMESTAMP(&t, &ep, CLIENT_SEND)
	std::printf("%s\n", tp.c_str());
	return tp.size() == 55 ? 0 : 2;
}
