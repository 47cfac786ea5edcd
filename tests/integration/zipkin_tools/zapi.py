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
