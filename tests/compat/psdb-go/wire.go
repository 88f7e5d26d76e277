package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// recorder wraps psdb's HTTP transport and checks what crosses the wire:
// the encodings psdb's client sends and gets back, and the HTTP version.
type recorder struct {
	next http.RoundTripper

	mu          sync.Mutex
	problems    []string
	s2Requests  int
	s2Responses int
	s2Streams   int
}

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	method := req.URL.Path[strings.LastIndexByte(req.URL.Path, '/')+1:]
	streaming := strings.HasPrefix(req.Header.Get("Content-Type"), "application/connect+")
	encodingHeader := "Content-Encoding"
	if streaming {
		encodingHeader = "Connect-Content-Encoding"
	}
	sent := req.Header.Get(encodingHeader)
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if resp.ProtoMajor != 2 {
		r.problems = append(r.problems, fmt.Sprintf("%s over %s", method, resp.Proto))
	}
	// psdb's client compresses every request with S2, even an empty one.
	if sent == "s2" {
		r.s2Requests++
	} else {
		r.problems = append(r.problems, fmt.Sprintf("%s request encoding %q", method, sent))
	}
	if resp.StatusCode == http.StatusOK {
		// A small answer may go uncompressed; a compressed one must be S2,
		// the codec psdb's client sent.
		switch got := resp.Header.Get(encodingHeader); got {
		case "s2":
			if streaming {
				r.s2Streams++
			} else {
				r.s2Responses++
			}
		case "", "identity":
		default:
			r.problems = append(r.problems, fmt.Sprintf("%s answered in %q", method, got))
		}
	}
	return resp, nil
}

// verdict: nil if every exchange was as PlanetScale's endpoint would have
// it (S2 both ways over HTTP/2), with S2 seen in each direction and kind.
func (r *recorder) verdict() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.problems) > 0 {
		return fmt.Errorf("%s", strings.Join(r.problems, "; "))
	}
	if r.s2Requests == 0 || r.s2Responses == 0 || r.s2Streams == 0 {
		return fmt.Errorf("S2 requests %d, unary answers %d, streams %d: each must be > 0",
			r.s2Requests, r.s2Responses, r.s2Streams)
	}
	return nil
}
