package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

// sender posts one body to the server's /api/traces.
type sender func(ctx context.Context, body []byte) error

// netHTTPSender posts through net/http's client, as most programs would.
// With several servers, the requests go to each in turn.
func netHTTPSender(client *http.Client, bases []string) sender {
	var next atomic.Uint64
	return func(ctx context.Context, body []byte) error {
		base := bases[int(next.Add(1)-1)%len(bases)]
		return post(ctx, client, base+"/api/traces", body)
	}
}

// leanSender posts over one keep-alive HTTP/1.1 connection per client, writing each request
// already framed and reading each answer with http.ReadResponse, as load generators such as wrk
// do. net/http's Transport costs about 0.1 ms of CPU per request here, on the two cores the server
// needs; this costs a fraction of that, so that the load test measures the server rather than
// itself.
// With several servers, the connections are spread over them in turn.
func leanSender(bases []string, clients int) (sender, error) {
	conns := make(chan *leanConn, clients)
	for i := range clients {
		u, err := url.Parse(bases[i%len(bases)])
		if err != nil {
			return nil, err
		}
		if u.Scheme != "http" {
			return nil, fmt.Errorf("the lean client speaks plain http only, not %s", u.Scheme)
		}
		conns <- &leanConn{host: u.Host}
	}
	return func(ctx context.Context, body []byte) error {
		c := <-conns
		defer func() { conns <- c }()
		return c.post(body)
	}, nil
}

type leanConn struct {
	host string
	conn net.Conn
	br   *bufio.Reader
	head []byte
}

func (c *leanConn) post(body []byte) error {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.host, 10*time.Second)
		if err != nil {
			return err
		}
		c.conn, c.br = conn, bufio.NewReaderSize(conn, 4096)
	}
	c.head = append(c.head[:0], "POST /api/traces HTTP/1.1\r\nHost: "...)
	c.head = append(c.head, c.host...)
	c.head = append(c.head, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	c.head = strconv.AppendInt(c.head, int64(len(body)), 10)
	c.head = append(c.head, "\r\n\r\n"...)
	bufs := net.Buffers{c.head, body}
	if _, err := bufs.WriteTo(c.conn); err != nil {
		c.close()
		return err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.close()
		return err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.close()
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /api/traces: %s: %s", resp.Status, out)
	}
	if resp.Close {
		c.close()
	}
	return nil
}

func (c *leanConn) close() {
	_ = c.conn.Close()
	c.conn = nil
}
