# SPDX-License-Identifier: MIT
"""What the Zipkin fixture scripts share: the collector's v2 API over HTTP."""
import json
import urllib.request


def post(url, spans):
    """POST spans (a list of dicts) as JSON to url/api/v2/spans: the status"""
    req = urllib.request.Request(url + "/api/v2/spans", data=json.dumps(spans).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req) as r:
        return r.status


def get(url, path):
    """GET url + path: the decoded JSON answer"""
    with urllib.request.urlopen(url + path) as r:
        return json.load(r)


class Tap:
    """TAP lines: tap.check(cond, what, *diagnostics); tap.failed counts"""

    def __init__(self, prefix=""):
        self.n = self.failed = 0
        self.prefix = prefix

    def check(self, cond, what, *diag):
        self.n += 1
        print("%s %d - %s%s" % ("ok" if cond else "not ok", self.n, self.prefix, what))
        if not cond:
            self.failed += 1
            for d in diag:
                print("#   %s" % d)
        return cond
