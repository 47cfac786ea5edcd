// SPDX-License-Identifier: MIT
//
// A Zipkin protobuf client for tests/integration/zipkin_proto.sh, built on
// the official Zipkin Go library's generated types (Debian's
// golang-github-openzipkin-zipkin-go-dev: zipkin-go/proto/v2, made from
// Zipkin's own zipkin.proto, not fay's) and Go's protobuf runtime.  Reads a
// JSON array of Zipkin v2 spans on stdin, encodes it as a ListOfSpans and
// POSTs it to URL/api/v2/spans with Content-Type application/x-protobuf.
// Prints the HTTP status and the answer's body.  Usage: proto_client URL
package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/ioutil"
	"net"
	"net/http"
	"os"

	"github.com/golang/protobuf/proto"
	zipkin_proto3 "github.com/openzipkin/zipkin-go/proto/v2"
)

type endpoint struct {
	ServiceName string `json:"serviceName"`
	IPv4        string `json:"ipv4"`
	IPv6        string `json:"ipv6"`
	Port        int32  `json:"port"`
}

type annotation struct {
	Timestamp uint64 `json:"timestamp"`
	Value     string `json:"value"`
}

type span struct {
	TraceID        string            `json:"traceId"`
	ParentID       string            `json:"parentId"`
	ID             string            `json:"id"`
	Kind           string            `json:"kind"`
	Name           string            `json:"name"`
	Timestamp      uint64            `json:"timestamp"`
	Duration       uint64            `json:"duration"`
	LocalEndpoint  *endpoint         `json:"localEndpoint"`
	RemoteEndpoint *endpoint         `json:"remoteEndpoint"`
	Annotations    []annotation      `json:"annotations"`
	Tags           map[string]string `json:"tags"`
	Debug          bool              `json:"debug"`
	Shared         bool              `json:"shared"`
}

func id(s string) []byte {
	if s == "" {
		return nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad id", s, err)
		os.Exit(2)
	}
	return b
}

func ep(e *endpoint) *zipkin_proto3.Endpoint {
	if e == nil {
		return nil
	}
	out := &zipkin_proto3.Endpoint{ServiceName: e.ServiceName, Port: e.Port}
	if ip := net.ParseIP(e.IPv4); ip != nil {
		out.Ipv4 = ip.To4()
	}
	if ip := net.ParseIP(e.IPv6); ip != nil {
		out.Ipv6 = ip.To16()
	}
	return out
}

func main() {
	var in []span
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "stdin:", err)
		os.Exit(2)
	}
	list := &zipkin_proto3.ListOfSpans{}
	for _, s := range in {
		p := &zipkin_proto3.Span{
			TraceId: id(s.TraceID), ParentId: id(s.ParentID), Id: id(s.ID),
			Kind: zipkin_proto3.Span_Kind(zipkin_proto3.Span_Kind_value[s.Kind]),
			Name: s.Name, Timestamp: s.Timestamp, Duration: s.Duration,
			LocalEndpoint: ep(s.LocalEndpoint), RemoteEndpoint: ep(s.RemoteEndpoint),
			Tags: s.Tags, Debug: s.Debug, Shared: s.Shared,
		}
		for _, a := range s.Annotations {
			p.Annotations = append(p.Annotations, &zipkin_proto3.Annotation{Timestamp: a.Timestamp, Value: a.Value})
		}
		list.Spans = append(list.Spans, p)
	}
	body, err := proto.Marshal(list)
	if err != nil {
		fmt.Fprintln(os.Stderr, "marshal:", err)
		os.Exit(2)
	}
	resp, err := http.Post(os.Args[1]+"/api/v2/spans", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		fmt.Fprintln(os.Stderr, "post:", err)
		os.Exit(1)
	}
	answer, _ := ioutil.ReadAll(resp.Body)
	fmt.Printf("%d %s\n", resp.StatusCode, bytes.TrimSpace(answer))
}
